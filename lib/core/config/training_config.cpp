#include "core/config/training_config.h"

namespace parla {

const config::SectionSchema<TrainingConfig>& TrainingConfig::schema() {
  using namespace config;
  static const SectionSchema<TrainingConfig> s = [] {
    SectionSchema<TrainingConfig> s("training", "Optimisation, batching, validation and checkpoints (parla-train).");
    s.add("lr", &TrainingConfig::lr, "Peak learning rate.", greater_than(0));
    s.add("batch_tokens", &TrainingConfig::batch_tokens, "Token budget per batch.", at_least(1));
    return s;
  }();
  return s;
}

}  // namespace parla

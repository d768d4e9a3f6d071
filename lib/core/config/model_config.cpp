#include "core/config/model_config.h"

namespace parla {

const config::SectionSchema<ModelConfig>& ModelConfig::schema() {
  using namespace config;
  static const SectionSchema<ModelConfig> s = [] {
    SectionSchema<ModelConfig> s("model", "Architecture and sizes of the model.");
    s.add("type", &ModelConfig::type, "Architecture.", one_of({"transformer", "rnn", "bert"}));
    s.add("d_model", &ModelConfig::d_model, "Model width.", at_least(1));
    return s;
  }();
  return s;
}

}  // namespace parla

#pragma once
// Section "training": Optimisation, batching, validation and checkpoints (parla-train).
#include <string>
#include <vector>

#include "core/config/schema.h"

namespace parla {

struct TrainingConfig {
  double lr = 0.0007;  // peak learning rate
  int batch_tokens = 4096;  // source+target tokens per batch

  static const config::SectionSchema<TrainingConfig>& schema();
};

}  // namespace parla

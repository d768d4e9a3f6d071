#pragma once
// Section "model": Architecture and sizes of the model.
#include <string>
#include <vector>

#include "core/config/schema.h"

namespace parla {

struct ModelConfig {
  std::string type = "transformer";  // transformer, rnn or bert
  int d_model = 512;  // model (embedding) width

  static const config::SectionSchema<ModelConfig>& schema();
};

}  // namespace parla

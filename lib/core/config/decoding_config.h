#pragma once
// Section "decoding": Search settings (parla-translate, validation BLEU in parla-train).
#include <string>
#include <vector>

#include "core/config/schema.h"

namespace parla {

struct DecodingConfig {
  int beam_size = 5;  // 1 = greedy
  double length_penalty = 0.6;  // GNMT alpha

  static const config::SectionSchema<DecodingConfig>& schema();
};

}  // namespace parla

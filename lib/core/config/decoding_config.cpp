#include "core/config/decoding_config.h"

namespace parla {

const config::SectionSchema<DecodingConfig>& DecodingConfig::schema() {
  using namespace config;
  static const SectionSchema<DecodingConfig> s = [] {
    SectionSchema<DecodingConfig> s("decoding", "Search settings (parla-translate, validation BLEU in parla-train).");
    s.add("beam_size", &DecodingConfig::beam_size, "Beam size; 1 is greedy search.", at_least(1));
    s.add("length_penalty", &DecodingConfig::length_penalty, "GNMT length penalty alpha.", at_least(0));
    return s;
  }();
  return s;
}

}  // namespace parla

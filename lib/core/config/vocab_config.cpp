#include "core/config/vocab_config.h"

namespace parla {

const config::SectionSchema<VocabConfig>& VocabConfig::schema() {
  using namespace config;
  static const SectionSchema<VocabConfig> s = [] {
    SectionSchema<VocabConfig> s("vocab", "SentencePiece vocabulary training (parla-preprocess).");
    s.add("model_type", &VocabConfig::model_type, "SentencePiece model type.", one_of({"unigram", "bpe"}));
    s.add("vocab_size", &VocabConfig::vocab_size, "Pieces per SentencePiece model, special ids included.", at_least(8));
    return s;
  }();
  return s;
}

}  // namespace parla

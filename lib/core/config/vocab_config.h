#pragma once
// Section "vocab": SentencePiece vocabulary training (parla-preprocess).
#include <string>
#include <vector>

#include "core/config/schema.h"

namespace parla {

struct VocabConfig {
  std::string model_type = "unigram";  // unigram or bpe
  int vocab_size = 8000;  // pieces per model, including the four special ids

  static const config::SectionSchema<VocabConfig>& schema();
};

}  // namespace parla

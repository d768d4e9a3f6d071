#pragma once
// One translation of one source sentence as a caller sees it: the detokenised text, the score beam search ranked
// it by, and its length in target pieces. What Translator::translate_batch returns and parla-serve answers
// with. Torch-free.
#include <cstddef>
#include <string>

namespace parla::decode {

struct Translation {
  std::string text;
  float score = 0;    // log P / GNMT length penalty
  size_t tokens = 0;  // target pieces, EOS not counted
};

}  // namespace parla::decode

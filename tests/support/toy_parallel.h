#pragma once
// A small parallel corpus of the toy words (tests/support/tiny_checkpoint.h), for parla-shortlist: 40 pairs whose
// target words are the source's shifted, so that co-occurrence finds rules and a shortlist changes translations.
#include <string>
#include <utility>

#include "support/temp_dir.h"
#include "support/tiny_checkpoint.h"

namespace parla::testing {

// Writes PREFIX.src and PREFIX.tgt into `dir`; returns their paths.
inline std::pair<std::string, std::string> write_toy_parallel(const TempDir& dir, const std::string& prefix) {
  const auto& words = toy_words();
  std::string src, tgt;
  for (int i = 0; i < 40; ++i) {
    for (int j = 0; j < 2 + i % 5; ++j) src += words[static_cast<size_t>((i + j) % 12)] + " ";
    for (int j = 0; j < 2 + i % 4; ++j) tgt += words[static_cast<size_t>((i * 3 + j + 5) % 12)] + " ";
    src += "\n";
    tgt += "\n";
  }
  return {dir.write(prefix + ".src", src), dir.write(prefix + ".tgt", tgt)};
}

}  // namespace parla::testing

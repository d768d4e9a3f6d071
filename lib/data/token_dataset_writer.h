#pragma once
// Writes one side of one split in the binarized format TokenDataset reads (docs/DATASET.md), streaming: the
// offsets go to the index file as sentences arrive, and the header is completed by finish().
#include <cstdint>
#include <string>
#include <vector>

#include "core/output_file.h"

namespace parla::data {

// 2 when every id of a vocabulary of `vocab_size` fits in uint16, else 4.
int token_bytes_for(int vocab_size);

class TokenDatasetWriter {
 public:
  // Creates PREFIX.bin and PREFIX.idx. token_bytes is 2 or 4.
  TokenDatasetWriter(const std::string& path_prefix, int token_bytes);
  // Appends one sentence. Throws DataError for an id that does not fit the token width or is negative.
  void add(const std::vector<int>& ids);
  // Completes the index header and closes both files (IoError on any write failure).
  void finish();

  uint64_t sentences() const { return sentences_; }
  uint64_t tokens() const { return tokens_; }

 private:
  OutputFile bin_, idx_;
  int token_bytes_;
  uint64_t sentences_ = 0, tokens_ = 0;
  std::vector<unsigned char> scratch_;
};

}  // namespace parla::data

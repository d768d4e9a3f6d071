#pragma once
// The binarized dataset that parla-preprocess writes and parla-train memory-maps (format: docs/DATASET.md).
// One side of one split is two files: PREFIX.bin, the token ids of all sentences back to back (little-endian
// uint16 when the vocabulary fits, else uint32), and PREFIX.idx, a header and N+1 token offsets. No torch here.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/sentencepiece_vocab.h"

namespace parla::data {

// The .idx header: magic, version, token width, counts; then (sentences + 1) uint64 offsets in tokens.
inline constexpr char kIndexMagic[8] = {'P', 'A', 'R', 'L', 'A', 'I', 'D', 'X'};
inline constexpr uint32_t kIndexVersion = 1;
inline constexpr size_t kIndexHeaderBytes = 32;

class TokenDataset {  // one side of one split
 public:
  // Maps PREFIX.bin and PREFIX.idx (e.g. DIR/train.de). Throws DataError naming the file when either is
  // missing, truncated or inconsistent (sizes are checked against the index).
  static TokenDataset open(const std::string& path_prefix);

  size_t size() const { return sentences_; }
  // Tokens of sentence i (no bos/eos stored). Throws std::out_of_range for i >= size().
  size_t length(size_t i) const;
  // Writes length(i) ids to out.
  void copy_to(size_t i, int64_t* out) const;
  std::vector<int64_t> get(size_t i) const;
  uint64_t total_tokens() const { return tokens_; }
  // The largest token id in the file (0 when empty), found by one pass at open(): a split is checked against its
  // vocabulary once, on the host, instead of at every embedding lookup on the device.
  uint32_t max_id() const { return max_id_; }
  int token_bytes() const { return token_bytes_; }
  const std::string& path_prefix() const { return prefix_; }

 private:
  struct Mapping;
  std::shared_ptr<const Mapping> bin_, idx_;
  const uint64_t* offsets_ = nullptr;
  const unsigned char* tokens_data_ = nullptr;
  size_t sentences_ = 0;
  uint64_t tokens_ = 0;
  uint32_t max_id_ = 0;
  int token_bytes_ = 2;
  std::string prefix_;
};

struct DatasetInfo {
  std::string dir, src_lang, tgt_lang;
  int src_vocab_size = 0, tgt_vocab_size = 0;
  bool joint = true;
  std::string src_spm_path, tgt_spm_path;  // absolute or relative to the working directory (dir + file name)
  // The piece of each id when the ids are not the SentencePiece models' own (a dataset encoded with an imported
  // model's vocabularies, vocab.from_checkpoint); empty otherwise.
  std::vector<std::string> src_pieces, tgt_pieces;
  // A multilingual model's (models::ModelMeta): its control pieces, and its languages with the dataset's pair as
  // "source" and "target" (whose tokens start every source and target); empty otherwise.
  std::vector<std::string> control_pieces;
  nlohmann::json languages = nlohmann::json::object();
  nlohmann::json meta;                     // the whole meta.json
};

// Reads DIR/meta.json (and the piece tables it names). Throws DataError naming the file and the missing or
// malformed key.
DatasetInfo read_dataset_info(const std::string& dir);

// The vocabularies the dataset was encoded with: its SentencePiece models, numbered by its piece tables when it has
// them. DataError naming the file when one does not load.
text::SentencePieceVocab source_vocab(const DatasetInfo& info);
text::SentencePieceVocab target_vocab(const DatasetInfo& info);

struct ParallelSplit {
  TokenDataset src, tgt;
};
// Opens DIR/SPLIT.SRC and DIR/SPLIT.TGT ("train" | "valid" | "test"); throws DataError when the split is
// missing or its two sides differ in sentence count.
ParallelSplit open_split(const DatasetInfo& info, const std::string& split);

}  // namespace parla::data

#pragma once
// parla-preprocess as a library call: a line-aligned parallel corpus in, a dataset directory out (layout and
// format: docs/DATASET.md). Passes, each streaming, so memory holds only the duplicate hashes and the
// SentencePiece sample:
//   1. read + clean + filter the training corpus (and separate valid/test files) into the work directory;
//   2. split held-out pairs off (seeded) and sample SentencePiece's training sentences from the train part;
//   3. train SentencePiece (joint or one model per language), or take the given vocabularies;
//   4. encode every split with worker threads and write the binarized dataset;
// all inside DIR.tmp-PID, renamed to DIR at the end, so a failure leaves nothing half-written.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "text/sentencepiece_vocab.h"

namespace parla::data {

// Vocabularies that already exist (a checkpoint's, vocab.from_checkpoint): they encode the corpus instead of
// newly trained SentencePiece models, and the dataset keeps them (with their piece tables) for parla-train.
struct ExistingVocab {
  text::SentencePieceVocab src, tgt;
  std::string origin;  // where they come from, for meta.json and the log
  // A multilingual model's (models::ModelMeta): its control pieces, and its language codes, of which
  // vocab.src_lang_code / tgt_lang_code (or data.src_lang / tgt_lang) name the corpus's; their tokens then start
  // every source and target, as the model's tokenizer places them.
  std::vector<std::string> control_pieces;
  nlohmann::json languages = nlohmann::json::object();
};

struct PreprocessOptions {
  bool force = false;  // replace an existing output directory
  std::optional<ExistingVocab> vocab;
};

struct PreprocessResult {
  std::string dir;
  nlohmann::json stats;  // what stats.json holds
  nlohmann::json meta;   // what meta.json holds
};

// The source and target training files of a config: data.train_src/train_tgt, or data.train_prefix plus the
// language suffixes (PREFIX.LANG or PREFIX.LANG.gz). Throws ConfigError/DataError naming what is missing.
std::pair<std::string, std::string> training_files(const DataConfig& data);

// Runs the whole pipeline. Throws UsageError (existing output without force), ConfigError, DataError (missing
// or unequal inputs, nothing left after cleaning) or IoError (unwritable output, disk full).
PreprocessResult preprocess(const Config& config, const PreprocessOptions& options);

}  // namespace parla::data

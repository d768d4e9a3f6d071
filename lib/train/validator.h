#pragma once
// Validation (Marian's validator.cpp, fairseq's validate): cross entropy and perplexity on held-out batches with
// teacher forcing, and BLEU of the model's own translations (the library's search, detokenized with the target
// SentencePiece model, scored with the toolkit's sacreBLEU-exact BLEU against the cleaned references).
#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

#include "data/batch.h"
#include "decode/search_options.h"
#include "models/seq2seq.h"
#include "text/sentencepiece_vocab.h"
#include "train/task.h"

namespace parla::train {

// Sums the task's loss terms over `batches` (no gradients; the model must already be in eval mode), under the
// training's autocast `precision` (runtime::resolve_precision of training.precision), as the training loss was.
ValidationResult evaluate_loss(Task& task, const std::vector<data::Batch>& batches, const torch::Device& device,
                               c10::ScalarType precision = c10::ScalarType::Float);

// Decodes sentences `ids` of `src` (sorted by length into batches of at most `batch_tokens` source tokens) and
// returns the detokenized translations in the order of `ids`.
std::vector<std::string> translate_split(models::Seq2SeqModel& model, const data::TokenDataset& src,
                                         const std::vector<int64_t>& ids, const text::SentencePieceVocab& vocab,
                                         const decode::SearchOptions& options, int64_t batch_tokens,
                                         const torch::Device& device);

// Corpus BLEU (sacreBLEU defaults: 13a tokenization, exp smoothing) of hypotheses against one reference each.
double corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references);

// Reads a text file's lines (the dataset's cleaned valid.LANG references). Throws DataError.
std::vector<std::string> read_lines(const std::string& path);

}  // namespace parla::train

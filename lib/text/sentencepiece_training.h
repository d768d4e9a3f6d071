#pragma once
// Training a SentencePiece vocabulary through its C++ API (no spm_train process, no temporary corpus file):
// the sentences come from memory, the model comes back as proto bytes.
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/vocab_config.h"

namespace parla::text {

struct SentencePieceTrainingResult {
  std::string model_proto;  // serialized ModelProto, loadable with SentencePieceVocab::from_serialized
  int vocab_size = 0;       // pieces in the trained model (may be below the request on a small corpus)
};

// Trains on `sentences` (already sampled by the caller) with pad=0, unk=1, bos=2, eos=3. vocab_size is a soft
// limit: when the corpus cannot support it, training retries with the largest size SentencePiece accepts and
// logs a warning, so small corpora just work. Throws DataError when training fails (message from
// SentencePiece), ConfigError when the requested size cannot hold the alphabet and byte pieces.
//
// BPE models are trained from the sentences' word counts (SentencePiece's tsv input): its BPE trainer splits
// sentences into words before anything else, so the model is the same, and neither side holds the sample twice.
// Unigram models get whole sentences: SentencePiece 0.1.97 prunes pieces by the share of *lines* they occur
// in, so word lines give a different and measurably less compact vocabulary (+40% pieces on a test corpus);
// the price is its seeding suffix array, ~20 bytes per character of the sample. `bpe_from_word_counts`
// exists for the test that checks the equivalence.
SentencePieceTrainingResult train_sentencepiece(const std::vector<std::string>& sentences, const VocabConfig& config,
                                                int threads, uint64_t seed, bool bpe_from_word_counts = true);

}  // namespace parla::text

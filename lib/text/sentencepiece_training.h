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
SentencePieceTrainingResult train_sentencepiece(const std::vector<std::string>& sentences, const VocabConfig& config,
                                                int threads, uint64_t seed);

}  // namespace parla::text

#pragma once
// A translating checkpoint for end-to-end tests of the executables: a tiny random Transformer
// (models/tiny_config.h) with a 48-piece SentencePiece model trained on a corpus of the twelve toy words. Its
// translations are nonsense but deterministic for a seed, which is what equality tests need.
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/config.h"
#include "models/checkpoint.h"
#include "models/factory.h"
#include "models/tiny_config.h"
#include "text/sentencepiece_training.h"
#include "text/sentencepiece_vocab.h"

namespace parla::testing {

inline const std::vector<std::string>& toy_words() {
  static const std::vector<std::string> words = {"the", "house", "is",   "small", "a",  "dog",
                                                 "runs", "fast", "green", "tree", "we", "see"};
  return words;
}

// Writes the checkpoint to `path`; `seed` draws the model's weights; `layers` (default: tiny_transformer()) may
// choose other layers, e.g. another self-attention variant. `target_vocab_size` > 0 gives the target side a
// SentencePiece model of its own of that size (separate vocabularies; `layers` must not share embeddings).
inline void write_tiny_checkpoint(const std::string& path, uint64_t seed, ModelConfig layers = tiny_transformer(),
                                  int target_vocab_size = 0) {
  const auto& words = toy_words();
  std::vector<std::string> corpus;
  for (int i = 0; i < 300; ++i) {
    std::string line;
    for (int j = 0; j < 3 + i % 7; ++j) line += words[static_cast<size_t>((i * 5 + j * 7 + i / 3) % 12)] + " ";
    corpus.push_back(line);
  }
  VocabConfig vc;
  vc.vocab_size = 48;
  vc.byte_fallback = false;
  vc.character_coverage = 1.0;
  const std::string proto = text::train_sentencepiece(corpus, vc, 1, 1).model_proto;
  const int64_t vocab = text::SentencePieceVocab::from_serialized(proto).size();
  std::string tgt_proto = proto;
  if (target_vocab_size > 0) {
    vc.vocab_size = target_vocab_size;
    tgt_proto = text::train_sentencepiece(corpus, vc, 1, 1).model_proto;
  }
  const int64_t tgt_vocab = text::SentencePieceVocab::from_serialized(tgt_proto).size();
  torch::manual_seed(seed);
  Config cfg;
  cfg.model = layers;
  cfg.model.dropout = 0;
  auto model = models::build_seq2seq(cfg.model, vocab, tgt_vocab);
  models::ModelMeta meta;
  meta.config = config::to_json(cfg);
  meta.src_spm = proto;
  meta.tgt_spm = tgt_proto;
  models::save_checkpoint(path, *model, meta);
}

}  // namespace parla::testing

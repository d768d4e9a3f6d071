#pragma once
// The checks every sequence-to-sequence model makes of its vocabulary sizes before building its embeddings.
#include <cstdint>

#include "core/config/model_config.h"

namespace parla::models {

// Throws ConfigError when either vocabulary cannot hold the special ids (pad, unk, bos, eos), or when
// model.share_embeddings asks for one table over vocabularies of different sizes.
void check_vocabulary_sizes(const ModelConfig& cfg, int64_t src_vocab, int64_t tgt_vocab);

}  // namespace parla::models

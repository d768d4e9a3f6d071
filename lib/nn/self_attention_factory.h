#pragma once
// Chooses and builds a self-attention variant (self_attention.h) from the model config: the one place that
// switches on the attention kind. Adding a variant: its file (the layer and its options beside its maths), a value
// of AttentionKind with its name (core/config/model_config.h, which the schema reads) and one line in
// make_self_attention.
#include "core/config/model_config.h"
#include "nn/self_attention.h"
#include "nn/sparse_attention.h"

namespace parla::nn {

// Self-attention `kind` (not kInherit) with the settings every layer has (`shared`: size, heads, dropout, seed) and the variant's
// own from `cfg` (model.local_window, model.sparse_*, model.routing_*, model.performer_*, model.nystrom_*).
SelfAttention make_self_attention(AttentionKind kind, const MultiHeadAttentionOptions& shared, const ModelConfig& cfg);

// The self-attention of layer `layer` (0-based) of the encoder or the decoder stack: model.encoder_attention or
// model.decoder_attention, both defaulting to model.attention; each layer of each stack draws its own random
// numbers (sparse, performer, routing), while the sparse pattern's random blocks are the same in every layer.
SelfAttention make_self_attention(const ModelConfig& cfg, bool decoder, int layer);

// model.sparse_pattern's atomic patterns and the model.sparse_* sizes; the band is model.local_window wide, and the
// random blocks are drawn from model.attention_seed alone.
SparsePattern sparse_pattern_of(const ModelConfig& cfg);

}  // namespace parla::nn

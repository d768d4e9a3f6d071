#pragma once
// Chooses and builds a self-attention variant (self_attention.h) from the model config: the one place that
// switches on the attention kind. Adding a variant: its file (the layer and its options beside its maths), a
// value here, its name in parse_attention_kind and one line in make_self_attention.
#include <string>

#include "core/config/model_config.h"
#include "nn/self_attention.h"

namespace parla::nn {

enum class AttentionKind { kFull, kLocal, kLinear, kSparse, kRouting, kPerformer, kNystrom };
// "full", "local", "linear", "sparse", "routing", "performer", "nystrom" (the model.*attention values).
AttentionKind parse_attention_kind(const std::string& name);
// Whether the variant can run causally (decoder self-attention): every one but nystrom.
bool attention_kind_is_causal(AttentionKind kind);

// Self-attention `kind` with the settings every layer has (`shared`: size, heads, dropout, seed) and the variant's
// own from `cfg` (model.local_window, model.sparse_*, model.routing_*, model.performer_*, model.nystrom_*).
SelfAttention make_self_attention(AttentionKind kind, const MultiHeadAttentionOptions& shared, const ModelConfig& cfg);

// The self-attention of layer `layer` (0-based) of the encoder or the decoder stack: model.encoder_attention or
// model.decoder_attention, both defaulting to model.attention; each layer of each stack draws its own random
// numbers (sparse, performer, routing), while the sparse pattern's random blocks are the same in every layer.
SelfAttention make_self_attention(const ModelConfig& cfg, bool decoder, int layer);

}  // namespace parla::nn

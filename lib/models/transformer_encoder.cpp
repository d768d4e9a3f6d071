#include "models/transformer_encoder.h"

#include <algorithm>

#include <torch/torch.h>

namespace parla::models {

nn::MultiHeadAttentionOptions self_attention_options(const ModelConfig& cfg, bool decoder, int layer) {
  nn::MultiHeadAttentionOptions o;
  o.d_model = cfg.d_model;
  o.heads = cfg.heads;
  o.dropout = cfg.attention_dropout;
  const std::string& own = decoder ? cfg.decoder_attention : cfg.encoder_attention;
  o.kind = nn::parse_attention_kind(own.empty() ? cfg.attention : own);
  o.window = cfg.local_window;
  o.self_attention = true;
  auto has = [&](const char* name) {
    return std::find(cfg.sparse_pattern.begin(), cfg.sparse_pattern.end(), name) != cfg.sparse_pattern.end();
  };
  o.sparse.band = has("band");
  o.sparse.window = cfg.local_window;
  o.sparse.global = has("global");
  o.sparse.global_tokens = cfg.sparse_global_tokens;
  o.sparse.dilated = has("dilated");
  o.sparse.dilation = cfg.sparse_dilation;
  o.sparse.dilated_window = cfg.sparse_dilated_window;
  o.sparse.random = has("random");
  o.sparse.random_blocks = cfg.sparse_random_blocks;
  o.sparse.block_local = has("block");
  o.sparse.block_size = cfg.sparse_block_size;
  o.routing_clusters = cfg.routing_clusters;
  o.routing_decay = cfg.routing_decay;
  o.performer_features = cfg.performer_features;
  o.performer_redraw_every = cfg.performer_redraw_every;
  o.nystrom_landmarks = cfg.nystrom_landmarks;
  o.nystrom_pinv_iterations = cfg.nystrom_pinv_iterations;
  o.nystrom_conv_kernel = cfg.nystrom_conv_kernel;
  // One stream per layer and stack; the sparse pattern's random blocks are the same in every layer.
  o.seed = static_cast<uint64_t>(cfg.attention_seed) * 1000003ULL + (decoder ? 1000ULL : 0ULL) + layer;
  o.sparse.seed = static_cast<uint64_t>(cfg.attention_seed);
  return o;
}

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(const ModelConfig& cfg, int layer)
    : pre_norm_(cfg.norm == LayerNormPlacement::kPre), dropout_(cfg.dropout) {
  self_attn = register_module("self_attn", nn::MultiHeadAttention(self_attention_options(cfg, false, layer)));
  ffn = register_module("ffn", nn::FeedForward(cfg.d_model, cfg.ffn_dim, cfg.activation, cfg.activation_dropout));
  self_attn_norm = register_module("self_attn_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.d_model})));
  ffn_norm = register_module("ffn_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.d_model})));
}

torch::Tensor TransformerEncoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& key_valid,
                                                   torch::Tensor* weights) {
  auto drop = [&](const torch::Tensor& t) { return dropout_ > 0 && is_training() ? torch::dropout(t, dropout_, true) : t; };
  torch::Tensor h = x;
  if (pre_norm_) {
    h = h + drop(self_attn->self_attend(self_attn_norm(h), key_valid, false, weights));
    h = h + drop(ffn(ffn_norm(h)));
  } else {
    h = self_attn_norm(h + drop(self_attn->self_attend(h, key_valid, false, weights)));
    h = ffn_norm(h + drop(ffn(h)));
  }
  return h;
}

TransformerEncoderImpl::TransformerEncoderImpl(const ModelConfig& cfg) {
  layers = register_module("layers", torch::nn::ModuleList());
  for (int i = 0; i < cfg.encoder_layers; ++i) layers->push_back(TransformerEncoderLayer(cfg, i));
  if (cfg.norm == LayerNormPlacement::kPre)
    final_norm = register_module("final_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.d_model})));
}

torch::Tensor TransformerEncoderImpl::forward(const torch::Tensor& x, const torch::Tensor& key_valid) {
  torch::Tensor h = x;
  for (size_t i = 0; i < layers->size(); ++i) h = layers->ptr<TransformerEncoderLayerImpl>(i)->forward(h, key_valid);
  if (final_norm) h = final_norm(h);
  return h;
}

}  // namespace parla::models

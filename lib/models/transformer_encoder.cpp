#include "models/transformer_encoder.h"

#include <torch/torch.h>

#include "nn/self_attention_factory.h"

namespace parla::models {

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(const ModelConfig& cfg, int layer)
    : pre_norm_(cfg.norm == LayerNormPlacement::kPre), dropout_(cfg.dropout) {
  self_attn = register_module("self_attn", nn::make_self_attention(cfg, /*decoder=*/false, layer));
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

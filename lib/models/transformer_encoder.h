#pragma once
// The Transformer encoder stack (Vaswani et al. 2017, Sec. 3.1): N layers of self-attention and feed-forward
// sublayers, each wrapped as x + Dropout(Sublayer(x)) with layer norm after the sum (post-norm, the paper) or
// before the sublayer (pre-norm, Wang et al. 2019, plus a final norm). Shared by the translation Transformer
// and BERT. Takes embedded inputs; the embeddings belong to the model.
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/normalization.h>
#include <torch/types.h>

#include "core/config/model_config.h"
#include "nn/feed_forward.h"
#include "nn/self_attention.h"

namespace parla::models {

class TransformerEncoderLayerImpl : public torch::nn::Module {
 public:
  // `layer` (0-based) seeds the layer's own random draws (sparse, performer, routing attention).
  TransformerEncoderLayerImpl(const ModelConfig& cfg, int layer);
  // x [B, S, D], key_valid bool [B, S] or undefined; `weights` receives the self-attention weights.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& key_valid, torch::Tensor* weights = nullptr);

  nn::SelfAttention self_attn{nullptr};  // the variant model.encoder_attention chooses
  nn::FeedForward ffn{nullptr};
  torch::nn::LayerNorm self_attn_norm{nullptr}, ffn_norm{nullptr};

 private:
  bool pre_norm_;
  double dropout_;
};
TORCH_MODULE(TransformerEncoderLayer);

class TransformerEncoderImpl : public torch::nn::Module {
 public:
  explicit TransformerEncoderImpl(const ModelConfig& cfg);
  // Embedded input x [B, S, D] -> [B, S, D].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& key_valid);
  int64_t num_layers() const { return static_cast<int64_t>(layers->size()); }
  TransformerEncoderLayer layer(int64_t i) { return layers->ptr<TransformerEncoderLayerImpl>(i); }

  torch::nn::ModuleList layers;
  torch::nn::LayerNorm final_norm{nullptr};  // pre-norm only
};
TORCH_MODULE(TransformerEncoder);

}  // namespace parla::models

#pragma once
// Full self-attention: scaled dot-product softmax over every position (Vaswani et al. 2017, Eq. 1), run by
// LibTorch 2's fused kernel when no weights are asked for, and decoded with the single-query kernel over the
// key/value cache. The default variant (model.attention "full").
#include "nn/self_attention.h"

namespace parla::nn {

class FullSelfAttentionImpl : public SelfAttentionImpl {
 public:
  explicit FullSelfAttentionImpl(const MultiHeadAttentionOptions& options);

 protected:
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& key_valid, bool causal, torch::Tensor* weights) override;
  torch::Tensor attend_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            SelfAttentionCache& cache, torch::Tensor* weights) override;
};
TORCH_MODULE(FullSelfAttention);

}  // namespace parla::nn

#include "nn/full_attention.h"

#include <torch/torch.h>

#include "nn/attention_masks.h"
#include "nn/self_attention_cache.h"

namespace parla::nn {

FullSelfAttentionImpl::FullSelfAttentionImpl(const MultiHeadAttentionOptions& options) : SelfAttentionImpl(options) {}

torch::Tensor FullSelfAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                            const torch::Tensor& key_valid, bool causal, torch::Tensor* weights) {
  const int64_t t = q.size(2);
  torch::Tensor out, allowed;
  if (key_valid.defined()) allowed = key_valid.unsqueeze(1).unsqueeze(2);
  // Fused kernel (LibTorch 2): full attention whose weights nobody asked for. A causal mask alone goes as
  // is_causal, which lets the kernel skip the masked blocks instead of reading a [T, T] mask.
  if (!weights)
    out = fused_attention(
        q, k, v, causal && allowed.defined() ? combine_masks(allowed, causal_mask(t, t).to(q.device())) : allowed,
        causal && !allowed.defined());
  if (!out.defined()) {
    if (causal) allowed = combine_masks(allowed, causal_mask(t, t).to(q.device()));
    out = softmax_attention(q, k, v, allowed, weights);
  }
  return out;
}

torch::Tensor FullSelfAttentionImpl::attend_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                                 SelfAttentionCache& cache, torch::Tensor* weights) {
  cache.kv.append(step_heads(k), step_heads(v));
  return softmax_cache_step(step_heads(q), cache, weights);
}

}  // namespace parla::nn

#include "nn/full_attention.h"

#include <torch/torch.h>

#include "nn/attention_masks.h"
#include "nn/self_attention_cache.h"
#include "nn/single_query_attention.h"

namespace parla::nn {

FullSelfAttentionImpl::FullSelfAttentionImpl(const MultiHeadAttentionOptions& options) : SelfAttentionImpl(options) {}

torch::Tensor FullSelfAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                            const torch::Tensor& key_valid, bool causal, torch::Tensor* weights) {
  const int64_t t = q.size(2);
  // Inference on the CPU without a causal mask (the encoder): the single-query kernel with one query row per
  // position, which sums over each sentence's own keys in a fixed order, so that a sentence's encoder output is the
  // same bits however far its batch pads it. LibTorch's products and softmax over the padded length rounded it
  // differently by an ulp, which int8 decoding turned into a quantization step: 12 of 1,000 greedy translations of
  // the shared Multi30k model changed between batch 1 and 64.
  if (!causal && !weights && q.device().is_cpu() && q.scalar_type() == torch::kFloat && k.size(2) == t &&
      inference(q)) {
    const int64_t b = q.size(0), h = q.size(1), dh = q.size(3);
    auto rows = q.permute({0, 2, 1, 3}).reshape({b * t, h, dh});  // sentence-major: t query rows per sentence
    return attend_memory(rows, k, v, key_valid, nullptr).view({b, t, h, dh}).permute({0, 2, 1, 3});
  }
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

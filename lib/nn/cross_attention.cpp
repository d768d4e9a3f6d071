#include "nn/cross_attention.h"

#include <torch/torch.h>

#include "nn/single_query_attention.h"
#include "nn/skipped_initialization.h"

namespace parla::nn {

CrossAttentionImpl::CrossAttentionImpl(const MultiHeadAttentionOptions& options) : MultiHeadAttentionImpl(options) {
  const int64_t d = options.d_model;
  q_proj = register_module("q_proj", Linear(d, d));
  kv_proj = register_module("kv_proj", Linear(d, 2 * d));
  if (!initialization_skipped()) {
    xavier_blocks(q_proj->weight);
    xavier_blocks(kv_proj->weight);
    torch::nn::init::zeros_(q_proj->bias);
    torch::nn::init::zeros_(kv_proj->bias);
  }
  register_out_proj();
}

std::pair<torch::Tensor, torch::Tensor> CrossAttentionImpl::project_memory(const torch::Tensor& memory) {
  auto kv = kv_proj(memory).chunk(2, -1);
  return {split_heads(kv[0]), split_heads(kv[1])};
}

torch::Tensor CrossAttentionImpl::cross_attend(const torch::Tensor& x, const torch::Tensor& k, const torch::Tensor& v,
                                               const torch::Tensor& key_valid, torch::Tensor* weights) {
  auto projected = q_proj(x);
  if (x.size(1) == 1 && inference(projected)) {
    const int64_t B = x.size(0);
    torch::Tensor w;
    auto out = attend_memory(projected.view({B, options_.heads, head_dim_}), k, v, key_valid, weights ? &w : nullptr);
    if (weights) *weights = w.unsqueeze(2);
    return out_proj(out.view({B, 1, options_.d_model}));
  }
  auto q = split_heads(projected);  // [B, H, T, Dh]
  torch::Tensor allowed;
  if (key_valid.defined()) allowed = key_valid.unsqueeze(1).unsqueeze(2);
  const int64_t B = q.size(0), M = k.size(0), H = q.size(1), T = q.size(2);
  if (M == B) {
    torch::Tensor out;
    if (!weights) out = fused_attention(q, k, v, allowed, false);
    if (!out.defined()) out = softmax_attention(q, k, v, allowed, weights);
    return out_proj(merge_heads(out));
  }
  TORCH_CHECK(M > 0 && B % M == 0, "cross_attend: ", B, " query rows for ", M, " memory rows");
  const int64_t G = B / M;
  // [M*G, H, T, Dh] -> [M, H, G*T, Dh]: a group's queries become extra query positions of its memory row.
  auto grouped = q.view({M, G, H, T, head_dim_}).permute({0, 2, 1, 3, 4}).reshape({M, H, G * T, head_dim_});
  auto out = softmax_attention(grouped, k, v, allowed, weights);
  auto ungroup = [&](const torch::Tensor& t) {
    return t.view({M, H, G, T, t.size(-1)}).permute({0, 2, 1, 3, 4}).reshape({B, H, T, t.size(-1)});
  };
  if (weights) *weights = ungroup(*weights);
  return out_proj(merge_heads(ungroup(out)));
}

}  // namespace parla::nn

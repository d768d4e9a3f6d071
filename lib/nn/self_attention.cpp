#include "nn/self_attention.h"

#include <algorithm>
#include <tuple>

#include <torch/torch.h>

#include "nn/self_attention_cache.h"
#include "nn/skipped_initialization.h"

namespace parla::nn {

SelfAttentionImpl::SelfAttentionImpl(const MultiHeadAttentionOptions& options) : MultiHeadAttentionImpl(options) {
  const int64_t d = options.d_model;
  qkv_proj = register_module("qkv_proj", Linear(d, 3 * d));
  if (!initialization_skipped()) {
    xavier_blocks(qkv_proj->weight);
    torch::nn::init::zeros_(qkv_proj->bias);
  }
  register_out_proj();
}

torch::Tensor SelfAttentionImpl::self_attend(const torch::Tensor& x, const torch::Tensor& key_valid, bool causal,
                                             torch::Tensor* weights) {
  auto qkv = qkv_proj(x).chunk(3, -1);
  auto q = split_heads(qkv[0]), k = split_heads(qkv[1]), v = split_heads(qkv[2]);
  return out_proj(merge_heads(attend(q, k, v, key_valid, causal, weights)));
}

torch::Tensor SelfAttentionImpl::self_attend_step(const torch::Tensor& x, SelfAttentionCache& cache,
                                                  torch::Tensor* weights) {
  auto qkv = qkv_proj(x).chunk(3, -1);
  if (cache.length == 0 && !cache.state) cache.state = new_decoding_state();
  cache.length += 1;
  return out_proj(attend_step(qkv[0], qkv[1], qkv[2], cache, weights));
}

std::unique_ptr<VariantDecodingState> SelfAttentionImpl::new_decoding_state() const { return nullptr; }

torch::Tensor SelfAttentionImpl::step_heads(const torch::Tensor& t) const {
  return t.reshape({t.size(0), options_.heads, head_dim_});
}

torch::Tensor SelfAttentionImpl::softmax_cache_step(const torch::Tensor& q, SelfAttentionCache& cache,
                                                    torch::Tensor* weights) {
  const int64_t N = q.size(0);
  if (!inference(q)) {
    TORCH_CHECK(!cache.kv.row_first().defined(), "rows that joined a running batch are decoded without autograd only");
    auto [k, v] = cache.kv.gather();
    return merge_heads(softmax_attention(q.unsqueeze(2), k, v, {}, weights));
  }
  torch::Tensor w;
  auto out = attend_cache(q, cache.kv, weights ? &w : nullptr);  // [N, H, Dh] = [N, D]
  if (weights) *weights = w.unsqueeze(2);
  return out.view({N, 1, options_.d_model});
}

SelfAttentionImpl::CachedPositions SelfAttentionImpl::cached_positions(const torch::Tensor& q,
                                                                       const SelfAttentionCache& cache) const {
  CachedPositions c;
  std::tie(c.k, c.v) = cache.kv.gather();
  const int64_t N = q.size(0), L = c.k.size(2);
  c.first = cache.kv.first();
  c.length = cache.kv.length();
  c.start.assign(N, c.first);
  if (cache.kv.row_first().defined()) {
    auto rf = cache.kv.row_first().to(torch::kCPU).contiguous();
    for (int64_t n = 0; n < N; ++n) c.start[n] = std::max(c.first, rf.data_ptr<int64_t>()[n]);
  }
  bool same_start = std::all_of(c.start.begin(), c.start.end(), [&](int64_t s) { return s == c.start[0]; });
  c.rows = same_start ? 1 : N;
  c.own = torch::zeros({c.rows, L}, torch::kBool);
  for (int64_t n = 0; n < c.rows; ++n) c.own[n].narrow(0, c.start[n] - c.first, c.length - c.start[n]).fill_(true);
  return c;
}

}  // namespace parla::nn

#include "nn/local_attention.h"

#include <algorithm>

#include <torch/torch.h>

#include "nn/self_attention_cache.h"

namespace parla::nn {

SparsePattern local_pattern(int64_t window) {
  SparsePattern p;
  p.band = true;
  p.window = window;
  // Blocks as wide as the window: each query block gathers its own and its two neighbours (3 blocks).
  p.block_size = std::max<int64_t>(16, window);
  return p;
}

LocalSelfAttentionImpl::LocalSelfAttentionImpl(const MultiHeadAttentionOptions& options,
                                               const LocalAttentionOptions& local)
    : SelfAttentionImpl(options), local_(local) {}

torch::Tensor LocalSelfAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                             const torch::Tensor& key_valid, bool causal, torch::Tensor* weights) {
  return sparse_attention(q, k, v, key_valid, local_pattern(local_.window), causal, attention_dropout(),
                          is_training(), weights);
}

torch::Tensor LocalSelfAttentionImpl::attend_step(const torch::Tensor& q, const torch::Tensor& k,
                                                  const torch::Tensor& v, SelfAttentionCache& cache,
                                                  torch::Tensor* weights) {
  cache.kv.append(step_heads(k), step_heads(v));
  // Positions older than the window can never be attended again: keep only the last window+1.
  cache.kv.drop_before(cache.kv.length() - (local_.window + 1));
  return softmax_cache_step(step_heads(q), cache, weights);
}

}  // namespace parla::nn

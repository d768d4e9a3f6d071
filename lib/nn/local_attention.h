#pragma once
// Local self-attention (Vaswani et al. 2017 Sec. 4, restricted self-attention): position i attends to the keys
// j with |i - j| <= window (and j <= i when causal). It runs as sparse attention with the band pattern alone
// (sparse_attention.h, blockwise: linear in T); decoding keeps only the last window + 1 keys in the cache.
#include <cstdint>

#include "nn/self_attention.h"
#include "nn/sparse_attention.h"

namespace parla::nn {

struct LocalAttentionOptions {
  int64_t window = 16;  // model.local_window
};

// The pattern local attention runs as: a band of `window` positions, blocks of at least the window.
SparsePattern local_pattern(int64_t window);

class LocalSelfAttentionImpl : public SelfAttentionImpl {
 public:
  LocalSelfAttentionImpl(const MultiHeadAttentionOptions& options, const LocalAttentionOptions& local);

 protected:
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& key_valid, bool causal, torch::Tensor* weights) override;
  torch::Tensor attend_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            SelfAttentionCache& cache, torch::Tensor* weights) override;

 private:
  LocalAttentionOptions local_;
};
TORCH_MODULE(LocalSelfAttention);

}  // namespace parla::nn

#pragma once
// Self-attention: one interface, one implementation per attention function (fairseq's modules/ layout). The layer
// projects x to queries, keys and values with one fused [D, 3D] matrix, lets its variant attend, and projects back
// with W^O; incremental decoding runs one position at a time against a SelfAttentionCache. The variants, each
// beside its maths and its own options:
//   full        scaled dot-product softmax (Vaswani et al. 2017)                  full_attention.h
//   local       a band of positions, computed blockwise                          local_attention.h
//   linear      elu+1 kernel (Katharopoulos et al. 2020)                         linear_attention.h
//   sparse      unions of position patterns (BigBird, Longformer), blockwise     sparse_attention.h
//   routing     k-means routed (Roy et al. 2021)                                 routing_attention.h
//   performer   FAVOR+ random features (Choromanski et al. 2021)                 performer_attention.h
//   nystrom     low rank (Xiong et al. 2021; encoder only)                       nystrom_attention.h
// self_attention_factory.h chooses one from the model config. Parameters and buffers keep the names they had as
// members of one layer (qkv_proj, out_proj, routing_centroids, ...): every checkpoint loads.
#include <memory>
#include <vector>

#include <torch/types.h>

#include "nn/multi_head_attention.h"

namespace parla::nn {

struct SelfAttentionCache;   // self_attention_cache.h
class VariantDecodingState;  // self_attention_cache.h

class SelfAttentionImpl : public MultiHeadAttentionImpl {
 public:
  // Self-attention over x [B, T, D]; key_valid bool [B, T] (true = real token) or undefined. When `weights`
  // is non-null it receives the attention weights [B, H, T, T] (the dense equivalent for the efficient variants).
  torch::Tensor self_attend(const torch::Tensor& x, const torch::Tensor& key_valid, bool causal,
                            torch::Tensor* weights = nullptr);
  // One causal step of self-attention: x [N, 1, D] is the newest position; the cache grows by one. Equal to
  // the last row of self_attend(all positions, causal=true).
  torch::Tensor self_attend_step(const torch::Tensor& x, SelfAttentionCache& cache, torch::Tensor* weights = nullptr);

  Linear qkv_proj{nullptr};  // [3D, D] = rows W^Q; W^K; W^V

 protected:
  // Registers qkv_proj and out_proj; a variant registers its own state after them.
  explicit SelfAttentionImpl(const MultiHeadAttentionOptions& options);

  // The variant's attention over q, k, v [B, H, T, Dh] -> [B, H, T, Dh]; `weights` as in self_attend.
  virtual torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& key_valid, bool causal, torch::Tensor* weights) = 0;
  // The variant's decoding step: q, k, v [N, 1, D] are the newest position's projections (heads not split yet),
  // `cache` holds the earlier positions (its length already counts the new one) -> [N, 1, D] before W^O.
  virtual torch::Tensor attend_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    SelfAttentionCache& cache, torch::Tensor* weights) = 0;

  // The variant's own decoding state, made at a cache's first step (null: the key/value cache is all it keeps).
  virtual std::unique_ptr<VariantDecodingState> new_decoding_state() const;

  // [N, 1, D] -> [N, H, Dh]: one position's heads, the layout of the key/value cache and the single-query kernel.
  torch::Tensor step_heads(const torch::Tensor& t) const;

  // A step of softmax attention of q [N, H, Dh] over every position in cache.kv (full and local attention, after
  // appending the newest key/value) -> [N, 1, D]. Without autograd or attention dropout it runs the single-query
  // kernel (single_query_attention.h); otherwise LibTorch ops on the gathered cache.
  torch::Tensor softmax_cache_step(const torch::Tensor& q, SelfAttentionCache& cache, torch::Tensor* weights);

  // The whole key/value cache as a masked step (sparse, routing) reads it: the patterns reach arbitrarily far back
  // (global tokens, random blocks, clusters), so every position is gathered and the newest query's allowed keys
  // are one mask row. Rows that joined a running batch (continuous batching) count their positions from their
  // own first one.
  struct CachedPositions {
    torch::Tensor k, v;           // [N, H, L, Dh] for positions first .. length - 1
    int64_t first = 0, length = 0;
    std::vector<int64_t> start;   // per row: its first position
    int64_t rows = 1;             // mask rows: 1 when every row started together (one row serves all), else N
    torch::Tensor own;            // bool [rows, L] on the CPU: the positions that belong to the row
  };
  CachedPositions cached_positions(const torch::Tensor& q, const SelfAttentionCache& cache) const;
};
TORCH_MODULE(SelfAttention);

}  // namespace parla::nn

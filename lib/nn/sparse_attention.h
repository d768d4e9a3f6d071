#pragma once
// Position-based sparse attention (seed 002, "Position-based Sparse attention", fig. 4): each query attends only to
// the keys that a union of atomic patterns allows, chosen by position alone:
//   band         |i - j| <= window                                   (local / sliding window)
//   global       i < g or j < g: the first g tokens see and are seen by every token (BigBird's ITC, Zaheer et al.
//                2020; Longformer's global attention)
//   dilated      j = i + k * dilation, |k| <= dilated_window          (Longformer's dilated window, Beltagy et al.
//                2020; with dilation 1 it is the band of width dilated_window; k = 0, the query itself, included)
//   random       query block I sees r key blocks drawn once from a fixed hash of (seed, I, candidates) (BigBird)
//   block-local  i and j in the same block of block_size positions  (blockwise attention, Qiu et al. 2019)
// Band + global + random is BigBird; block-local + dilated with dilation = block size is the strided pattern of the
// Sparse Transformer (Child et al. 2019). The softmax of Vaswani et al. 2017 Eq. 1 runs over the allowed keys only.
//
// sparse_attention is computed BLOCKWISE: the queries of a block of block_size positions are scored against the
// gathered keys of the few key blocks their patterns touch, so time and memory grow with T * (blocks per query
// block) * block_size, linearly in T; no [T, T] tensor is built (except for the optional dense weights). The global
// query rows (non-causal) are g dense rows, g * T, also linear.
//
// Sequences are padded at the end: a row's real length L is its number of valid keys (key_valid), and positions
// >= L neither attend nor are attended (their output is zero). Patterns depend on absolute positions only, except
// the non-causal random blocks, which are drawn among the row's own ceil(L / block_size) blocks so that a padded
// batch equals batch 1; causal random blocks are drawn among blocks 0..I and do not depend on L at all, so
// incremental decoding equals the full pass.
//
// SparseSelfAttention is the layer (model.attention "sparse"); its options are the SparsePattern.
#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "nn/self_attention.h"

namespace parla::nn {

struct SparsePattern {
  bool band = false;
  int64_t window = 16;           // band: |i - j| <= window (model.local_window)
  bool global = false;
  int64_t global_tokens = 1;     // global: positions < global_tokens (model.sparse_global_tokens)
  bool dilated = false;
  int64_t dilation = 2;          // dilated: j = i + k * dilation (model.sparse_dilation)
  int64_t dilated_window = 8;    // ... for |k| <= dilated_window (model.sparse_dilated_window)
  bool random = false;
  int64_t random_blocks = 1;     // random: key blocks per query block (model.sparse_random_blocks)
  uint64_t seed = 1;             // random: the fixed draw's seed (a model constant, saved with it)
  bool block_local = false;      // block-local: same block
  int64_t block_size = 32;       // blocks of the computation and of the random / block-local patterns
                                 // (model.sparse_block_size)
};

// Throws ConfigError naming the key ("model.sparse_block_size", "model.local_window", "model.sparse_global_tokens",
// "model.sparse_dilation", "model.sparse_dilated_window", "model.sparse_random_blocks") when a size is zero or
// negative (sizes of disabled patterns are not checked, the block size always is), and "model.sparse_pattern" when
// no pattern is enabled.
void validate(const SparsePattern& p);

// The random key blocks of query block `query_block`, sorted: min(r, n) distinct blocks drawn from the n candidates
// by a partial Fisher-Yates shuffle driven by splitmix64 of (seed, query_block, n, step). Candidates: causal ->
// blocks 0..query_block (independent of the length); non-causal -> blocks 0..ceil(real_length / block_size) - 1.
std::vector<int64_t> random_key_blocks(const SparsePattern& p, int64_t query_block, int64_t real_length, bool causal);

// Dense mask [length, length], bool, true = query i may attend to key j: the union of the enabled patterns for a
// sequence of real length `length` (and j <= i when causal). Quadratic: for weights, heatmaps and tests.
torch::Tensor sparse_pattern_mask(int64_t length, const SparsePattern& p, bool causal);

// One row of that mask for incremental decoding: bool [len] over keys 0..len-1 for the query at position pos
// (0 <= pos < len), in a sequence of real length len. For causal decoding, len = pos + 1 and the row equals row pos
// of sparse_pattern_mask of any longer sequence.
torch::Tensor sparse_pattern_row(int64_t pos, int64_t len, const SparsePattern& p, bool causal);

// Blockwise sparse softmax attention (self-attention: Tq == Tk). q, k, v [B, H, T, Dh]; key_valid bool [B, T]
// (true = real token, padding at the end) or undefined. Dropout on the attention weights when training. If
// `weights` is non-null it receives the dense equivalent weights [B, H, T, T] (before dropout; quadratic, for
// tests and heatmaps only). Returns [B, H, T, Dh].
torch::Tensor sparse_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& key_valid, const SparsePattern& p, bool causal,
                               double dropout = 0.0, bool training = false, torch::Tensor* weights = nullptr);

// The number of (query, key) scores the blockwise computation evaluates per head for one unpadded sequence of
// `length` positions (the padded block slots included): ceil(T / b) * b * K * b, plus g * T for the non-causal
// global rows, where K is the most key blocks any query block gathers.
int64_t sparse_computed_pairs(int64_t length, const SparsePattern& p, bool causal);

// Sparse self-attention with pattern `pattern` (validated here). A decoding step reads the whole key/value cache
// under one row of the pattern (sparse_pattern_row).
class SparseSelfAttentionImpl : public SelfAttentionImpl {
 public:
  SparseSelfAttentionImpl(const MultiHeadAttentionOptions& options, const SparsePattern& pattern);

 protected:
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& key_valid, bool causal, torch::Tensor* weights) override;
  torch::Tensor attend_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            SelfAttentionCache& cache, torch::Tensor* weights) override;

 private:
  SparsePattern pattern_;
};
TORCH_MODULE(SparseSelfAttention);

}  // namespace parla::nn

#pragma once
// Multi-head attention (Vaswani et al. 2017, Sec. 3.2.2): MultiHead(Q, K, V) = Concat(head_1..h) W^O with
// head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V). All heads are computed at once in a [B, H, T, Dh] layout
// with batched matmuls; self-attention uses one fused [D, 3D] projection for Q, K and V.
//
// The self-attention function is selectable (model.attention, encoder_attention, decoder_attention): full scaled
// dot-product; local (a band of positions) and sparse (unions of position patterns), both computed blockwise;
// linear (elu+1 kernel, Katharopoulos et al. 2020); performer (FAVOR+ random features, Choromanski et al. 2021);
// routing (k-means routed, Roy et al. 2021); nystrom (low-rank, Xiong et al. 2021; encoder only). Cross-attention
// is always full. Every call can return the (dense equivalent) weights.
#include <string>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "nn/linear.h"
#include "nn/linear_attention.h"
#include "nn/single_query_attention.h"
#include "nn/sparse_attention.h"

namespace parla::nn {

enum class AttentionKind { kFull, kLocal, kLinear, kSparse, kRouting, kPerformer, kNystrom };
// "full", "local", "linear", "sparse", "routing", "performer", "nystrom" (the model.*attention values).
AttentionKind parse_attention_kind(const std::string& name);
// Whether the variant can run causally (decoder self-attention): every one but nystrom.
bool attention_kind_is_causal(AttentionKind kind);

struct MultiHeadAttentionOptions {
  int64_t d_model = 512;
  int64_t heads = 8;
  double dropout = 0.0;                     // on the attention weights (full and local)
  AttentionKind kind = AttentionKind::kFull;
  int64_t window = 16;                      // local attention (a band: sparse with band only)
  bool self_attention = true;               // fused QKV projection; else separate Q and fused KV projections
  SparsePattern sparse;                     // sparse attention's patterns (window is the band's)
  int64_t routing_clusters = 4;             // routing: centroids per head
  double routing_decay = 0.999;             // routing: lambda of the centroids' moving averages
  int64_t performer_features = 64;          // performer: random features m
  int64_t performer_redraw_every = 1000;    // performer: training forward passes between redraws (0 = never)
  int64_t nystrom_landmarks = 32;           // nystrom: landmarks m
  int64_t nystrom_pinv_iterations = 6;      // nystrom: pseudo-inverse iterations
  int64_t nystrom_conv_kernel = 33;         // nystrom: depthwise convolution skip over the values (0 = none)
  uint64_t seed = 1;                        // random connections, features and initial centroids of this layer
};

// The pattern local attention runs as: a band of `window` positions, blocks of at least the window.
SparsePattern local_pattern(int64_t window);

// Incremental state of one decoder self-attention layer: the key/value cache (full, local; beam reorders
// touch only its ancestor table) or the running sums of linear attention. Rows are hypotheses.
struct SelfAttentionCache {
  KeyValueCache kv;
  LinearAttentionState linear;
  int64_t length = 0;  // positions seen so far
  void reorder(const torch::Tensor& indices);
  // Continuous batching (KeyValueCache::add_rows, rebase): `count` rows join with an empty history; positions
  // before `position` are forgotten and the rest renumbered.
  void add_rows(int64_t count);
  void rebase(int64_t position);
};

class MultiHeadAttentionImpl : public torch::nn::Module {
 public:
  explicit MultiHeadAttentionImpl(const MultiHeadAttentionOptions& options);

  // Self-attention over x [B, T, D]; key_valid bool [B, T] (true = real token) or undefined. When `weights`
  // is non-null it receives the attention weights [B, H, T, T].
  torch::Tensor self_attend(const torch::Tensor& x, const torch::Tensor& key_valid, bool causal,
                            torch::Tensor* weights = nullptr);
  // One causal step of self-attention: x [N, 1, D] is the newest position; the cache grows by one. Equal to
  // the last row of self_attend(all positions, causal=true). Without autograd or attention dropout it runs
  // the single-query kernel (single_query_attention.h); otherwise LibTorch ops on the gathered cache.
  torch::Tensor self_attend_step(const torch::Tensor& x, SelfAttentionCache& cache, torch::Tensor* weights = nullptr);

  // Cross-attention keys and values of `memory` [B, S, D] -> {k, v} each [B, H, S, Dh]; computed once per
  // sentence and cached by the decoder.
  std::pair<torch::Tensor, torch::Tensor> project_memory(const torch::Tensor& memory);
  // Full attention of queries x [B, T, D] over projected memory; key_valid [B, S] or undefined. The memory may
  // have fewer rows than x, M with B = M * G: then rows m*G .. m*G+G-1 of x (the beams of one sentence) all
  // attend to memory row m, without copying the memory G times. One query position per row (decoding) without
  // autograd or attention dropout runs the single-query kernel.
  torch::Tensor cross_attend(const torch::Tensor& x, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& key_valid, torch::Tensor* weights = nullptr);

  const MultiHeadAttentionOptions& options() const { return options_; }

  Linear qkv_proj{nullptr};  // self-attention: [3D, D] = rows W^Q; W^K; W^V
  Linear q_proj{nullptr};    // cross-attention
  Linear kv_proj{nullptr};   // cross-attention: [2D, D] = rows W^K; W^V
  Linear out_proj{nullptr};  // W^O

  // Routing's centroid state (buffers, saved in checkpoints; seed 002 eqs. 8-10): centroids [H, K, Dh], their
  // moving sums [H, K, Dh] and counts [H, K]. Performer's features [m, Dh] and the training forward passes seen
  // (int64 scalar: the redraw schedule resumes with the checkpoint). Nystrom's convolution [H, 1, kernel, 1].
  torch::Tensor routing_centroids, routing_sums, routing_counts;
  torch::Tensor performer_features, performer_passes;
  torch::Tensor nystrom_conv;

 private:
  torch::Tensor split_heads(const torch::Tensor& x) const;  // [B, T, D] -> [B, H, T, Dh]
  torch::Tensor merge_heads(const torch::Tensor& x) const;  // [B, H, T, Dh] -> [B, T, D]
  // Softmax attention; `allowed` bool broadcastable to [B, H, Tq, Tk] or undefined.
  torch::Tensor softmax_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& allowed, torch::Tensor* weights);

  // LibTorch 2's fused scaled_dot_product_attention with the same mask semantics as softmax_attention (a row
  // without allowed keys gives zeros); undefined where this LibTorch has none. Its attention dropout draws other
  // random numbers than the explicit path's: the same distribution, not the same masks.
  torch::Tensor fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const torch::Tensor& allowed, bool is_causal);

  // The single-query kernel applies: no gradient through `t` is wanted and no attention dropout is due.
  bool inference(const torch::Tensor& t) const;

  // Self-attention of the variants other than full and linear over q, k, v [B, H, T, Dh].
  torch::Tensor efficient_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const torch::Tensor& key_valid, bool causal, torch::Tensor* weights);
  // Performer's schedule: in training, redraw the features every performer_redraw_every forward passes.
  void maybe_redraw_features();
  // One decoding step of sparse or routing attention: the newest query q [N, H, Dh] over the whole cache.
  torch::Tensor masked_cache_step(const torch::Tensor& q, SelfAttentionCache& cache, torch::Tensor* weights);

  MultiHeadAttentionOptions options_;
  int64_t head_dim_;
};
TORCH_MODULE(MultiHeadAttention);

}  // namespace parla::nn

#pragma once
// Multi-head attention (Vaswani et al. 2017, Sec. 3.2.2): MultiHead(Q, K, V) = Concat(head_1..h) W^O with
// head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V). All heads are computed at once in a [B, H, T, Dh] layout
// with batched matmuls. This is what the two kinds of attention layer share: the heads' layout, the output
// projection W^O and scaled dot-product softmax attention (with LibTorch 2's fused kernel where it applies).
// Self-attention (self_attention.h) adds a fused [D, 3D] projection for Q, K and V and one implementation per
// attention function (full, local, linear, sparse, routing, performer, nystrom); cross-attention
// (cross_attention.h) adds the projections of the decoder's queries and of the encoder's memory.
#include <cstdint>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "nn/linear.h"

namespace parla::nn {

// The settings every attention layer has; a self-attention variant's own settings sit beside it.
struct MultiHeadAttentionOptions {
  int64_t d_model = 512;
  int64_t heads = 8;
  double dropout = 0.0;  // on the attention weights (the softmax variants: full, local, sparse, routing; cross)
  uint64_t seed = 1;     // self-attention: random connections, features and initial centroids of this layer
};

class MultiHeadAttentionImpl : public torch::nn::Module {
 public:
  const MultiHeadAttentionOptions& options() const { return options_; }

  Linear out_proj{nullptr};  // W^O

 protected:
  // Throws ConfigError naming model.heads when d_model is not divisible by the heads.
  explicit MultiHeadAttentionImpl(const MultiHeadAttentionOptions& options);

  // Xavier uniform per [D, D] block of a fused projection matrix (as fairseq initialises separate ones), so each
  // block has the fan of a [D, D] matrix.
  void xavier_blocks(torch::Tensor w) const;
  // Registers out_proj (Xavier uniform, zero bias). Called by the layers after their input projections: the
  // registration order is the parameters' order, which the optimizer state in checkpoints follows.
  void register_out_proj();

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
  // The attention dropout probability of this call: options().dropout in training, else 0.
  double attention_dropout() const;

  MultiHeadAttentionOptions options_;
  int64_t head_dim_;
};

}  // namespace parla::nn

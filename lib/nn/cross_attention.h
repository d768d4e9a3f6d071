#pragma once
// Cross-attention (encoder-decoder attention, Vaswani et al. 2017 Sec. 3.2.3): the decoder's queries attend to
// the encoder's output, always with full softmax attention. The memory's keys and values are projected once per
// sentence (project_memory) and cached by the decoder; the beams of one sentence share its memory row.
#include <utility>

#include <torch/types.h>

#include "nn/multi_head_attention.h"

namespace parla::nn {

class CrossAttentionImpl : public MultiHeadAttentionImpl {
 public:
  explicit CrossAttentionImpl(const MultiHeadAttentionOptions& options);

  // Cross-attention keys and values of `memory` [B, S, D] -> {k, v} each [B, H, S, Dh]; computed once per
  // sentence and cached by the decoder.
  std::pair<torch::Tensor, torch::Tensor> project_memory(const torch::Tensor& memory);
  // Full attention of queries x [B, T, D] over projected memory; key_valid [B, S] or undefined. The memory may
  // have fewer rows than x, M with B = M * G: then rows m*G .. m*G+G-1 of x (the beams of one sentence) all
  // attend to memory row m, without copying the memory G times. One query position per row (decoding) without
  // autograd or attention dropout runs the single-query kernel.
  torch::Tensor cross_attend(const torch::Tensor& x, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& key_valid, torch::Tensor* weights = nullptr);

  Linear q_proj{nullptr};   // W^Q
  Linear kv_proj{nullptr};  // [2D, D] = rows W^K; W^V
};
TORCH_MODULE(CrossAttention);

}  // namespace parla::nn

#pragma once
// Attention scoring functions from the literature, each mapping queries [..., Tq, dq] and keys [..., Tk, dk]
// to scores [..., Tq, Tk]:
//   dot           q . k                                (Luong et al. 2015, "dot")
//   scaled dot    q . k / sqrt(d_k)                    (Vaswani et al. 2017, Eq. 1)
//   general       q^T W k                              (Luong et al. 2015, "general", multiplicative)
//   additive      v^T tanh(W1 k + W2 q)                (Bahdanau et al. 2015, Eq. 6, "concat"/MLP)
// The parametrised ones split into a key projection, done once per source sentence (cacheable for decoding),
// and the per-query scoring.
#include <string>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "nn/linear.h"

namespace parla::nn {

torch::Tensor dot_scores(const torch::Tensor& q, const torch::Tensor& k);
torch::Tensor scaled_dot_scores(const torch::Tensor& q, const torch::Tensor& k);

// Common interface of the parametrised scores, so the RNN decoder can hold either.
class AttentionScoreImpl : public torch::nn::Module {
 public:
  // Key-side work that does not depend on the query (cached for all decoder steps).
  virtual torch::Tensor project_keys(const torch::Tensor& keys) = 0;
  // Scores [B, Tq, Tk] of queries [B, Tq, dq] against projected keys [B, Tk, *].
  virtual torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& projected_keys) = 0;
  torch::Tensor forward(const torch::Tensor& queries, const torch::Tensor& keys) {
    return score(queries, project_keys(keys));
  }
};

// s^T W h: W maps keys (dk) to the query space (dq), so score = q . (W k).
class GeneralScoreImpl : public AttentionScoreImpl {
 public:
  GeneralScoreImpl(int64_t query_dim, int64_t key_dim);
  torch::Tensor project_keys(const torch::Tensor& keys) override;
  torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& projected_keys) override;
  Linear w{nullptr};  // [dq, dk], no bias
};
TORCH_MODULE(GeneralScore);

// v^T tanh(W1 h + W2 s) with h the keys (encoder annotations) and s the query (decoder state).
class AdditiveScoreImpl : public AttentionScoreImpl {
 public:
  AdditiveScoreImpl(int64_t query_dim, int64_t key_dim, int64_t attention_dim);
  torch::Tensor project_keys(const torch::Tensor& keys) override;
  torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& projected_keys) override;
  Linear w1{nullptr};  // keys -> attention_dim, no bias
  Linear w2{nullptr};  // queries -> attention_dim, with bias
  Linear v{nullptr};   // attention_dim -> 1, no bias
};
TORCH_MODULE(AdditiveScore);

}  // namespace parla::nn

#include "nn/attention_scores.h"

#include <cmath>

#include <torch/torch.h>

#include "nn/skipped_initialization.h"

namespace parla::nn {

torch::Tensor dot_scores(const torch::Tensor& q, const torch::Tensor& k) { return torch::matmul(q, k.transpose(-2, -1)); }

torch::Tensor scaled_dot_scores(const torch::Tensor& q, const torch::Tensor& k) {
  // Scaling q before the product costs Tq*d multiplications instead of Tq*Tk.
  return torch::matmul(q * (1.0 / std::sqrt(static_cast<double>(q.size(-1)))), k.transpose(-2, -1));
}

GeneralScoreImpl::GeneralScoreImpl(int64_t query_dim, int64_t key_dim) {
  w = register_module("w", Linear(torch::nn::LinearOptions(key_dim, query_dim).bias(false)));
  if (!initialization_skipped()) torch::nn::init::xavier_uniform_(w->weight);
}

torch::Tensor GeneralScoreImpl::project_keys(const torch::Tensor& keys) { return w(keys); }

torch::Tensor GeneralScoreImpl::score(const torch::Tensor& queries, const torch::Tensor& projected_keys) {
  return torch::matmul(queries, projected_keys.transpose(-2, -1));
}

AdditiveScoreImpl::AdditiveScoreImpl(int64_t query_dim, int64_t key_dim, int64_t attention_dim) {
  w1 = register_module("w1", Linear(torch::nn::LinearOptions(key_dim, attention_dim).bias(false)));
  w2 = register_module("w2", Linear(torch::nn::LinearOptions(query_dim, attention_dim)));
  v = register_module("v", Linear(torch::nn::LinearOptions(attention_dim, 1).bias(false)));
  if (initialization_skipped()) return;
  torch::nn::init::xavier_uniform_(w1->weight);
  torch::nn::init::xavier_uniform_(w2->weight);
  torch::nn::init::zeros_(w2->bias);
  torch::nn::init::xavier_uniform_(v->weight);
}

torch::Tensor AdditiveScoreImpl::project_keys(const torch::Tensor& keys) { return w1(keys); }

torch::Tensor AdditiveScoreImpl::score(const torch::Tensor& queries, const torch::Tensor& projected_keys) {
  // [B, Tq, 1, A] + [B, 1, Tk, A] -> tanh -> v -> [B, Tq, Tk]
  auto e = torch::tanh(w2(queries).unsqueeze(-2) + projected_keys.unsqueeze(-3));
  return v(e).squeeze(-1);
}

}  // namespace parla::nn

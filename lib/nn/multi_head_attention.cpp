#include "nn/multi_head_attention.h"

#include <string>

#include <torch/torch.h>

#include "core/error.h"
#include "runtime/torch_compat.h"
#include "nn/attention_scores.h"
#include "nn/masked_softmax.h"
#include "nn/skipped_initialization.h"

namespace parla::nn {

MultiHeadAttentionImpl::MultiHeadAttentionImpl(const MultiHeadAttentionOptions& options) : options_(options) {
  const int64_t d = options.d_model;
  if (options.heads < 1 || d % options.heads != 0)
    throw ConfigError("key 'model.heads': d_model " + std::to_string(d) + " is not divisible by " +
                      std::to_string(options.heads) + " heads");
  head_dim_ = d / options.heads;
}

void MultiHeadAttentionImpl::xavier_blocks(torch::Tensor w) const {
  const int64_t d = options_.d_model;
  torch::NoGradGuard g;
  for (int64_t i = 0; i < w.size(0) / d; ++i) {
    auto block = w.narrow(0, i * d, d);
    torch::nn::init::xavier_uniform_(block);
  }
}

void MultiHeadAttentionImpl::register_out_proj() {
  const int64_t d = options_.d_model;
  out_proj = register_module("out_proj", Linear(d, d));
  if (initialization_skipped()) return;
  torch::nn::init::xavier_uniform_(out_proj->weight);
  torch::nn::init::zeros_(out_proj->bias);
}

torch::Tensor MultiHeadAttentionImpl::split_heads(const torch::Tensor& x) const {
  return x.view({x.size(0), x.size(1), options_.heads, head_dim_}).transpose(1, 2);
}

torch::Tensor MultiHeadAttentionImpl::merge_heads(const torch::Tensor& x) const {
  return x.transpose(1, 2).reshape({x.size(0), x.size(2), options_.d_model});
}

torch::Tensor MultiHeadAttentionImpl::softmax_attention(const torch::Tensor& q, const torch::Tensor& k,
                                                        const torch::Tensor& v, const torch::Tensor& allowed,
                                                        torch::Tensor* weights) {
  auto w = masked_softmax(scaled_dot_scores(q, k), allowed);  // Eq. 1
  if (weights) *weights = w;
  if (options_.dropout > 0 && is_training()) w = torch::dropout(w, options_.dropout, true);
  return torch::matmul(w, v);
}

torch::Tensor MultiHeadAttentionImpl::fused_attention(const torch::Tensor& q, const torch::Tensor& k,
                                                      const torch::Tensor& v, const torch::Tensor& allowed,
                                                      bool is_causal) {
  if (!compat::has_fused_attention()) return {};
  const double p = attention_dropout();
  if (!allowed.defined()) return compat::scaled_dot_product_attention(q, k, v, {}, p, is_causal);
  // A query row without any allowed key: the explicit path (masked_softmax) gives zero weights, hence a zero
  // output, where SDPA gives NaN (and NaN gradients). Such a row attends to every key here, finitely, and its
  // output is then zeroed, which also zeroes the gradient flowing into it.
  auto has_key = allowed.any(-1, /*keepdim=*/true);
  auto out = compat::scaled_dot_product_attention(q, k, v, allowed.logical_or(has_key.logical_not()), p, false);
  return out.masked_fill(has_key.logical_not(), 0.0);
}

bool MultiHeadAttentionImpl::inference(const torch::Tensor& t) const {
  return !(torch::GradMode::is_enabled() && t.requires_grad()) && !(options_.dropout > 0 && is_training());
}

double MultiHeadAttentionImpl::attention_dropout() const {
  return options_.dropout > 0 && is_training() ? options_.dropout : 0.0;
}

}  // namespace parla::nn

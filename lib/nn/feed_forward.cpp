#include "nn/feed_forward.h"

#include <torch/torch.h>

#include "core/error.h"
#include "nn/skipped_initialization.h"

namespace parla::nn {

FeedForwardImpl::FeedForwardImpl(int64_t d_model, int64_t ffn_dim, Activation activation, double activation_dropout)
    : activation_(activation), activation_dropout_(activation_dropout) {
  fc1 = register_module("fc1", Linear(d_model, ffn_dim));
  fc2 = register_module("fc2", Linear(ffn_dim, d_model));
  if (initialization_skipped()) return;
  for (auto* l : {&fc1, &fc2}) {
    torch::nn::init::xavier_uniform_((*l)->weight);
    torch::nn::init::zeros_((*l)->bias);
  }
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x) {
  auto h = fc1(x);
  h = activation_ == Activation::kGelu    ? torch::gelu(h)
      : activation_ == Activation::kSwish ? torch::silu(h)
                                          : torch::relu(h);
  if (activation_dropout_ > 0 && is_training()) h = torch::dropout(h, activation_dropout_, true);
  return fc2(h);
}

}  // namespace parla::nn

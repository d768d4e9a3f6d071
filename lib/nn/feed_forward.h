#pragma once
// Position-wise feed-forward network (Vaswani et al. 2017, Eq. 2): FFN(x) = act(x W1 + b1) W2 + b2, with ReLU
// as in the paper, GELU (Hendrycks & Gimpel 2016; BERT) or swish x sigmoid(x) (Ramachandran et al. 2017, also
// SiLU; Marian's OPUS-MT models), and optional dropout after the activation.
#include <string>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "core/config/model_config.h"
#include "nn/linear.h"

namespace parla::nn {

class FeedForwardImpl : public torch::nn::Module {
 public:
  FeedForwardImpl(int64_t d_model, int64_t ffn_dim, Activation activation, double activation_dropout);
  torch::Tensor forward(const torch::Tensor& x);

  Linear fc1{nullptr}, fc2{nullptr};
  Activation activation() const { return activation_; }

 private:
  Activation activation_;
  double activation_dropout_;
};
TORCH_MODULE(FeedForward);

}  // namespace parla::nn

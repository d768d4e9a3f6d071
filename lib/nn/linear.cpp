#include "nn/linear.h"

#include <cmath>
#include <ostream>
#include <tuple>

#include <torch/torch.h>

#include "nn/skipped_initialization.h"

namespace parla::nn {

LinearImpl::LinearImpl(const torch::nn::LinearOptions& options) : options(options) { reset(); }

void LinearImpl::reset() {
  weight = register_parameter("weight", torch::empty({options.out_features(), options.in_features()}));
  if (options.bias())
    bias = register_parameter("bias", torch::empty(options.out_features()));
  else
    bias = register_parameter("bias", {}, /*requires_grad=*/false);
  if (!initialization_skipped()) reset_parameters();
}

// LibTorch's initialisation of torch::nn::Linear, draw for draw.
void LinearImpl::reset_parameters() {
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    int64_t fan_in = 0, fan_out = 0;
    std::tie(fan_in, fan_out) = torch::nn::init::_calculate_fan_in_and_fan_out(weight);
    const double bound = 1 / std::sqrt(static_cast<double>(fan_in));
    torch::nn::init::uniform_(bias, -bound, bound);
  }
}

void LinearImpl::pretty_print(std::ostream& stream) const {
  stream << "parla::nn::Linear(in_features=" << options.in_features() << ", out_features=" << options.out_features()
         << ", bias=" << (options.bias() ? "true" : "false") << ")";
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) {
  if (int8_) return int8_linear(x, *int8_, bias);
  if (packed_) return packed_linear(x, *packed_, bias);
  return torch::linear(x, weight, bias);
}

void LinearImpl::use_int8(Int8Matrix m) {
  TORCH_CHECK(m.rows() == weight.size(0) && m.cols() == weight.size(1), "use_int8: shape mismatch");
  torch::NoGradGuard no_grad;
  int8_ = std::make_shared<const Int8Matrix>(std::move(m));
  weight.set_data(released_like(weight));
}

void LinearImpl::use_packed(PackedMatrix m) {
  TORCH_CHECK(m.rows == weight.size(0) && m.cols == weight.size(1), "use_packed: shape mismatch");
  torch::NoGradGuard no_grad;
  packed_ = std::make_shared<const PackedMatrix>(std::move(m));
  weight.set_data(released_like(weight));
}

}  // namespace parla::nn

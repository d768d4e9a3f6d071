#include "nn/linear.h"

#include <torch/torch.h>

namespace parla::nn {

torch::Tensor LinearImpl::forward(const torch::Tensor& x) {
  if (int8_) return int8_linear(x, *int8_, bias);
  if (packed_) return packed_linear(x, *packed_, bias);
  return torch::nn::LinearImpl::forward(x);
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

#pragma once
// Tensor comparisons shared by the tests.
#include <torch/torch.h>

namespace parla::testing {

// The largest absolute elementwise difference, computed in double so that the comparison adds no rounding.
inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

}  // namespace parla::testing

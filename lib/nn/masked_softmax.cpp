#include "nn/masked_softmax.h"

#include <limits>

#include <torch/torch.h>

namespace parla::nn {

torch::Tensor masked_softmax(const torch::Tensor& scores, const torch::Tensor& allowed) {
  if (!allowed.defined()) return torch::softmax(scores, -1);
  auto blocked = allowed.logical_not();
  double lowest = scores.scalar_type() == torch::kDouble ? std::numeric_limits<double>::lowest()
                                                         : std::numeric_limits<float>::lowest();
  auto weights = torch::softmax(scores.masked_fill(blocked, lowest), -1);
  return weights.masked_fill(blocked, 0.0);
}

}  // namespace parla::nn

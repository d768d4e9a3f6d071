#include "nn/masked_softmax.h"

#include <limits>

#include <ATen/Dispatch.h>
#include <torch/torch.h>

namespace parla::nn {

namespace {

// The most negative finite value of `type`: -65504 for fp16, about -3.4e38 for bf16 and fp32. One fixed fill
// (float's lowest, or fairseq's old -1e9 / -1e4) does not fit every dtype: in fp16 masked_fill refuses it, and
// rounded it would be -inf, which turns a fully masked row into NaN.
c10::Scalar lowest_finite(c10::ScalarType type) {
  c10::Scalar v;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, type, "masked_softmax_fill",
                                  [&] { v = c10::Scalar(std::numeric_limits<scalar_t>::lowest()); });
  return v;
}

}  // namespace

torch::Tensor masked_softmax(const torch::Tensor& scores, const torch::Tensor& allowed) {
  if (!allowed.defined()) return torch::softmax(scores, -1);
  auto blocked = allowed.logical_not();
  // Softmax subtracts the row maximum, an allowed (finite) score when there is one, so a filled position's
  // exponent is at most lowest - max: it rounds to -inf at worst and gets weight 0, never NaN.
  auto weights = torch::softmax(scores.masked_fill(blocked, lowest_finite(scores.scalar_type())), -1);
  return weights.masked_fill(blocked, 0.0);
}

}  // namespace parla::nn

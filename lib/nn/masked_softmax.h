#pragma once
// Softmax restricted to allowed positions (padding and causal masks, Vaswani et al. 2017, Sec. 3.2.3).
#include <torch/types.h>

namespace parla::nn {

// softmax over the last dimension of `scores` where `allowed` (bool, broadcastable to scores) is true;
// disallowed positions get exactly zero weight. A row with no allowed position yields all zeros, never NaN
// (and a zero, finite gradient): masked scores are set to the lowest finite value of the scores' own dtype
// (fp16's -65504, not float's, so that half precision works) instead of -inf, so such a row is a finite uniform
// softmax that the final fill zeroes. `allowed` may be undefined (no mask).
torch::Tensor masked_softmax(const torch::Tensor& scores, const torch::Tensor& allowed);

}  // namespace parla::nn

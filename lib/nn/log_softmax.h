#pragma once
// A decoder step's output distribution, log_softmax over the vocabulary, with the CPU kernel where it applies
// (kernels/log_softmax.h: one exp per logit, no library call, the same bits for a row in any batch) and LibTorch's
// log_softmax elsewhere. Search reads either this or the logits with row_log_sum_exp: the same numbers.
#include <vector>

#include <torch/types.h>

namespace parla::nn {

// log_softmax over the last dimension of [N, V] logits.
torch::Tensor log_softmax_rows(const torch::Tensor& logits);

// Where the kernel computes log_softmax_rows (contiguous float [N, V] on the CPU).
bool log_softmax_kernel_applies(const torch::Tensor& logits);

// lse[r] for the rows with need[r] (0 for the others), so that log_softmax_rows(logits)[r][v] == logits[r][v] - lse[r]
// bit for bit. `logits` must be one the kernel applies to.
std::vector<float> row_log_sum_exp(const torch::Tensor& logits, const std::vector<bool>& need);

}  // namespace parla::nn

#include "nn/log_softmax.h"

#include <algorithm>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "kernels/log_softmax.h"

namespace parla::nn {
namespace {

// Rows per task: ~64k logits each, so that a beam-5 step of a small vocabulary stays on the calling thread (waking
// another costs more than the work; see nn/single_query_attention.cpp).
int64_t grain(int64_t width) { return std::max<int64_t>(1, 65536 / std::max<int64_t>(1, width)); }

}  // namespace

bool log_softmax_kernel_applies(const torch::Tensor& logits) {
  return logits.device().is_cpu() && logits.scalar_type() == torch::kFloat && logits.dim() == 2 &&
         logits.is_contiguous() && !logits.requires_grad();
}

torch::Tensor log_softmax_rows(const torch::Tensor& logits) {
  if (!log_softmax_kernel_applies(logits)) return torch::log_softmax(logits, -1);
  auto out = torch::empty_like(logits);
  const int64_t V = logits.size(1);
  const float* x = logits.data_ptr<float>();
  float* y = out.data_ptr<float>();
  at::parallel_for(0, logits.size(0), grain(V), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) kernels::log_softmax(x + r * V, V, y + r * V);
  });
  return out;
}

std::vector<float> row_log_sum_exp(const torch::Tensor& logits, const std::vector<bool>& need) {
  TORCH_CHECK(log_softmax_kernel_applies(logits) && static_cast<int64_t>(need.size()) == logits.size(0),
              "row_log_sum_exp: logits must be contiguous float [N, V] on the CPU, with N flags");
  const int64_t V = logits.size(1);
  std::vector<float> lse(need.size(), 0.0f);
  const float* x = logits.data_ptr<float>();
  at::parallel_for(0, logits.size(0), grain(V), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      if (need[static_cast<size_t>(r)]) lse[static_cast<size_t>(r)] = kernels::log_sum_exp(x + r * V, V);
  });
  return lse;
}

}  // namespace parla::nn

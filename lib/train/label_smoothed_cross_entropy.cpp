#include "train/label_smoothed_cross_entropy.h"

#include <torch/nn/functional.h>

namespace parla::train {

TokenLoss label_smoothed_cross_entropy(const torch::Tensor& logits, const torch::Tensor& target, double epsilon,
                                       int64_t pad_id) {
  const int64_t vocab = logits.size(-1);
  auto lprobs = torch::log_softmax(logits.reshape({-1, vocab}).to(torch::kFloat), -1);
  auto tgt = target.reshape({-1});
  auto keep = tgt.ne(pad_id);
  auto nll = -lprobs.gather(1, tgt.unsqueeze(1)).squeeze(1);
  nll = nll.masked_fill(~keep, 0.0);
  TokenLoss out;
  out.tokens = keep.sum();
  auto nll_sum = nll.sum();
  if (epsilon > 0 && vocab > 1) {
    auto smooth = (-lprobs.sum(-1)).masked_fill(~keep, 0.0);
    const double eps_i = epsilon / static_cast<double>(vocab - 1);
    out.loss = (1.0 - epsilon - eps_i) * nll_sum + eps_i * smooth.sum();
  } else {
    out.loss = nll_sum;
  }
  out.nll = nll_sum.detach();
  return out;
}

}  // namespace parla::train

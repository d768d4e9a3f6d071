#include "nn/attention_masks.h"

#include <torch/torch.h>

namespace parla::nn {

torch::Tensor padding_mask(const torch::Tensor& tokens, int64_t pad_id) {
  return tokens.ne(pad_id).unsqueeze(1).unsqueeze(2);
}

namespace {
// Query positions (column) and key positions (row), both absolute.
std::pair<torch::Tensor, torch::Tensor> positions(int64_t tq, int64_t tk, int64_t offset) {
  auto q = torch::arange(offset, offset + tq, torch::kLong).unsqueeze(1);
  auto k = torch::arange(tk, torch::kLong).unsqueeze(0);
  return {q, k};
}
}  // namespace

torch::Tensor causal_mask(int64_t tq, int64_t tk, int64_t offset) {
  auto [q, k] = positions(tq, tk, offset);
  return k.le(q);
}

torch::Tensor local_mask(int64_t tq, int64_t tk, int64_t window, bool causal, int64_t offset) {
  auto [q, k] = positions(tq, tk, offset);
  auto m = (q - k).abs().le(window);
  if (causal) m = m.logical_and(k.le(q));
  return m;
}

torch::Tensor combine_masks(const torch::Tensor& a, const torch::Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return a.logical_and(b);
}

}  // namespace parla::nn

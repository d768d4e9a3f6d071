#include "nn/self_attention_cache.h"

#include <algorithm>

#include <torch/torch.h>

namespace parla::nn {

void SelfAttentionCache::reorder(const torch::Tensor& indices) {
  kv.reorder(indices);
  if (linear.s.defined()) linear.s = linear.s.index_select(0, indices);
  if (linear.z.defined()) linear.z = linear.z.index_select(0, indices);
}

void SelfAttentionCache::add_rows(int64_t count) {
  kv.add_rows(count);
  // Linear attention's running sums start at zero for a new row, and 0 + x == x: the same sums as alone.
  auto grow = [&](torch::Tensor& t) {
    if (!t.defined() || count <= 0) return;
    auto shape = t.sizes().vec();
    shape[0] = count;
    t = torch::cat({t, torch::zeros(shape, t.options())});
  };
  grow(linear.s);
  grow(linear.z);
}

void SelfAttentionCache::rebase(int64_t position) {
  position = std::min(position, length);
  if (position <= 0) return;
  kv.rebase(position);
  length -= position;
}

}  // namespace parla::nn

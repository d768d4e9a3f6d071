#include "nn/self_attention_cache.h"

#include <algorithm>

#include <torch/torch.h>

namespace parla::nn {

void SelfAttentionCache::reorder(const torch::Tensor& indices) {
  kv.reorder(indices);
  if (state) state->reorder(indices);
}

void SelfAttentionCache::add_rows(int64_t count) {
  kv.add_rows(count);
  if (state) state->add_rows(count);
}

void SelfAttentionCache::rebase(int64_t position) {
  position = std::min(position, length);
  if (position <= 0) return;
  kv.rebase(position);
  length -= position;
}

}  // namespace parla::nn

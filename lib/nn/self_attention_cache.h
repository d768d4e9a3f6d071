#pragma once
// Incremental state of one decoder self-attention layer, whatever its variant: the key/value cache (full, local,
// sparse, routing; beam reorders touch only its ancestor table) or the running sums of linear and performer
// attention. Rows are hypotheses.
#include <cstdint>

#include <torch/types.h>

#include "nn/linear_attention.h"
#include "nn/single_query_attention.h"

namespace parla::nn {

struct SelfAttentionCache {
  KeyValueCache kv;
  LinearAttentionState linear;
  int64_t length = 0;  // positions seen so far
  void reorder(const torch::Tensor& indices);
  // Continuous batching (KeyValueCache::add_rows, rebase): `count` rows join with an empty history; positions
  // before `position` are forgotten and the rest renumbered.
  void add_rows(int64_t count);
  void rebase(int64_t position);
};

}  // namespace parla::nn

#pragma once
// Incremental state of one decoder self-attention layer, whatever its variant: the key/value cache (full, local,
// sparse, routing; beam reorders touch only its ancestor table) and whatever state of its own the variant makes
// (linear and performer attention's running sums). The interface knows none of the variants: each creates its
// state (SelfAttentionImpl::new_decoding_state) and alone reads it. Rows are hypotheses.
#include <cstdint>
#include <memory>

#include <torch/types.h>

#include "nn/single_query_attention.h"

namespace parla::nn {

// A variant's decoding state beside the key/value cache.
class VariantDecodingState {
 public:
  virtual ~VariantDecodingState() = default;
  // Beam search keeps, repeats and drops rows: row i becomes the old row indices[i].
  virtual void reorder(const torch::Tensor& indices) = 0;
  // Continuous batching: `count` rows join at the end with an empty history.
  virtual void add_rows(int64_t count) = 0;
};

struct SelfAttentionCache {
  KeyValueCache kv;
  // Made by the variant at the cache's first step; null for variants that keep only `kv`.
  std::unique_ptr<VariantDecodingState> state;
  int64_t length = 0;  // positions seen so far
  void reorder(const torch::Tensor& indices);
  // Continuous batching (KeyValueCache::add_rows, rebase): `count` rows join with an empty history; positions
  // before `position` are forgotten and the rest renumbered.
  void add_rows(int64_t count);
  void rebase(int64_t position);
};

}  // namespace parla::nn

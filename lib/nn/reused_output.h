#pragma once
// The output of a product written into memory its caller keeps from call to call: a decoder step's [rows, V] logits
// at batch 64 and a 58k vocabulary are 60 MB, which glibc maps and unmaps at every step in a thread other than main
// (its arenas are 64 MB mappings; MALLOC_MMAP_MAX_ does not apply there).
#include <cstdint>

#include <torch/types.h>

namespace parla::nn {

// A float [rows, n] CPU tensor: a fresh one when `storage` is null, else a view of *storage, which is replaced by a
// larger one when too small. The view is valid until the next call with the same storage.
inline torch::Tensor reused_output(torch::Tensor* storage, int64_t rows, int64_t n) {
  if (!storage) return torch::empty({rows, n}, torch::kFloat);
  if (!storage->defined() || storage->numel() < rows * n) *storage = torch::empty({rows * n}, torch::kFloat);
  return storage->narrow(0, 0, rows * n).view({rows, n});
}

}  // namespace parla::nn

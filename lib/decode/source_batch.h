#pragma once
// The decoder's input for a batch of sentences: piece ids -> int64 [B, S] on the CPU, each row followed by EOS
// and right-padded with PAD to the longest.
#include <cstddef>
#include <vector>

#include <torch/types.h>

namespace parla::decode {

// Rows `rows` of `ids` (in that order).
torch::Tensor source_batch(const std::vector<std::vector<int>>& ids, const std::vector<size_t>& rows);

}  // namespace parla::decode

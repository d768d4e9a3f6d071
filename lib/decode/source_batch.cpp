#include "decode/source_batch.h"

#include <algorithm>

#include <torch/torch.h>

#include "models/seq2seq.h"

namespace parla::decode {

torch::Tensor source_batch(const std::vector<std::vector<int>>& ids, const std::vector<size_t>& rows) {
  size_t width = 1;
  for (size_t r : rows) width = std::max(width, ids[r].size() + 1);
  auto src = torch::full({static_cast<int64_t>(rows.size()), static_cast<int64_t>(width)}, parla::kPadId,
                         torch::kLong);
  auto acc = src.accessor<int64_t, 2>();
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& s = ids[rows[i]];
    for (size_t j = 0; j < s.size(); ++j) acc[i][j] = s[j];
    acc[i][s.size()] = parla::kEosId;
  }
  return src;
}

}  // namespace parla::decode

#include "models/output_shortlist.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "kernels/log_softmax.h"

namespace parla::models {

int64_t padded_width(int64_t width, int64_t vocab) {
  int64_t octave = 1;  // the largest power of two <= width
  while (octave * 2 <= width) octave *= 2;
  const int64_t step = std::max<int64_t>(256, octave / 8);
  return std::min(vocab, (width + step - 1) / step * step);
}

void OutputShortlist::set_vocabularies(const std::vector<std::vector<int64_t>>& by_id, int64_t vocab) {
  // The union by marking (linear in the ids; sorting 64 sentences' ids cost a few milliseconds per batch).
  std::vector<int32_t> position(static_cast<size_t>(vocab), -1);
  int64_t width = 0;
  for (const auto& v : by_id)
    for (int64_t id : v) {
      TORCH_CHECK(id >= 0 && id < vocab, "OutputShortlist: token ", id, " outside the vocabulary of ", vocab);
      if (position[id] < 0) ++width;
      position[id] = 0;
    }
  // Filler columns: the lowest ids outside the union (no row reads them).
  int64_t fill = padded_width(width, vocab) - width;
  for (int64_t id = 0; id < vocab && fill > 0; ++id)
    if (position[id] < 0) {
      position[id] = 0;
      --fill;
    }
  std::vector<int64_t> all;
  for (int64_t id = 0; id < vocab; ++id)
    if (position[id] == 0) {
      position[id] = static_cast<int32_t>(all.size());
      all.push_back(id);
    }
  columns = torch::tensor(all, torch::kLong);
  vocabularies.clear();
  vocabularies.reserve(by_id.size());
  for (const auto& v : by_id) {
    std::vector<int32_t> positions;
    positions.reserve(v.size());
    for (int64_t id : v) positions.push_back(position[id]);
    vocabularies.push_back(std::move(positions));
  }
  ++version;
}

torch::Tensor shortlist_log_softmax(const torch::Tensor& logits, const OutputShortlist& s, int64_t vocab) {
  const int64_t rows = static_cast<int64_t>(s.row_vocabulary.size()), width = s.columns.size(0);
  TORCH_CHECK(logits.dim() == 2 && logits.size(0) == rows && logits.size(1) == width,
              "shortlist_log_softmax: logits must be [", rows, ", ", width, "], got ", logits.sizes());
  auto x = logits.to(torch::kCPU, torch::kFloat).contiguous();
  auto out = torch::full({rows, vocab}, -std::numeric_limits<float>::infinity(), torch::kFloat);
  const float* xp = x.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const int64_t* ids = s.columns.data_ptr<int64_t>();
  // Each row on its own, in its vocabulary's order, with one fixed-order sum: the same bits in any batch.
  int64_t work = 0;
  for (int32_t v : s.row_vocabulary) work += static_cast<int64_t>(s.vocabularies.at(v).size());
  const int64_t grain = std::max<int64_t>(1, rows * 65536 / std::max<int64_t>(1, work));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> gathered;
    for (int64_t r = begin; r < end; ++r) {
      const auto& positions = s.vocabularies[s.row_vocabulary[r]];
      const float* row = xp + r * width;
      const int64_t n = static_cast<int64_t>(positions.size());
      gathered.resize(n);
      for (int64_t j = 0; j < n; ++j) gathered[j] = row[positions[j]];
      // The full vocabulary's kernel over the row's own entries (kernels/log_softmax.h).
      const float lse = kernels::log_sum_exp(gathered.data(), n);
      float* o = op + r * vocab;
      for (int64_t j = 0; j < n; ++j) o[ids[positions[j]]] = gathered[j] - lse;
    }
  });
  return out.to(logits.device());
}

}  // namespace parla::models

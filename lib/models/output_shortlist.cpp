#include "models/output_shortlist.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/Parallel.h>
#include <torch/torch.h>

namespace parla::models {

void OutputShortlist::set_vocabularies(const std::vector<std::vector<int64_t>>& by_id) {
  std::vector<int64_t> all;
  for (const auto& v : by_id) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  columns = torch::tensor(all, torch::kLong);
  vocabularies.clear();
  for (const auto& v : by_id) {
    std::vector<int32_t> positions;
    positions.reserve(v.size());
    for (int64_t id : v)
      positions.push_back(static_cast<int32_t>(std::lower_bound(all.begin(), all.end(), id) - all.begin()));
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
  // Each row on its own, in its vocabulary's order, with one sequential sum: the same bits in any batch.
  int64_t work = 0;
  for (int32_t v : s.row_vocabulary) work += static_cast<int64_t>(s.vocabularies.at(v).size());
  const int64_t grain = std::max<int64_t>(1, rows * 65536 / std::max<int64_t>(1, work));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> gathered;
    for (int64_t r = begin; r < end; ++r) {
      const auto& positions = s.vocabularies[s.row_vocabulary[r]];
      const float* row = xp + r * width;
      gathered.resize(positions.size());
      float max = -std::numeric_limits<float>::infinity();
      for (size_t j = 0; j < positions.size(); ++j) {
        gathered[j] = row[positions[j]];
        max = std::max(max, gathered[j]);
      }
      double sum = 0;
      for (float g : gathered) sum += std::exp(g - max);
      const float lse = max + static_cast<float>(std::log(sum));
      float* o = op + r * vocab;
      for (size_t j = 0; j < positions.size(); ++j) o[ids[positions[j]]] = gathered[j] - lse;
    }
  });
  return out.to(logits.device());
}

}  // namespace parla::models

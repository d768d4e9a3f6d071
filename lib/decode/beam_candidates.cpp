#include "decode/beam_candidates.h"

#include <algorithm>
#include <limits>

#include <ATen/Parallel.h>
#include <torch/torch.h>

namespace parla::decode {
namespace {

bool before(const Candidate& a, const Candidate& b) {
  return a.score != b.score ? a.score > b.score : a.index < b.index;
}

constexpr int64_t kChunk = 64;

// One sentence: rows [beam, V]. Indices grow along the scan, so a later candidate that only ties the worst
// kept one loses the tie: entering a full list takes a strictly higher score.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
void scan(const float* logp, int64_t V, int64_t beam, const float* scores, const float* shift, int64_t count,
          std::vector<Candidate>& best) {
  const float ninf = -std::numeric_limits<float>::infinity();
  best.clear();
  for (int64_t k = 0; k < beam; ++k) {
    const float s = scores[k];
    if (!(s > ninf)) continue;  // a dead row (or a NaN score)
    // x - 0 is x for every float: without a shift, the scores are exactly s + x.
    const float lse = shift ? shift[k] : 0.0f;
    const float* row = logp + k * V;
    for (int64_t v0 = 0; v0 < V; v0 += kChunk) {
      const int64_t n = std::min(kChunk, V - v0);
      const bool full = static_cast<int64_t>(best.size()) == count;
      if (full && n == kChunk) {
        // fl(s + fl(x - lse)) is monotone in x: if the chunk's largest entry cannot beat the threshold, none can.
        float lanes[8];  // -inf start: a NaN never enters a lane, so it cannot hide a larger value
        for (int j = 0; j < 8; ++j) lanes[j] = ninf;
        for (int64_t i = 0; i < kChunk; i += 8)
          for (int j = 0; j < 8; ++j) lanes[j] = lanes[j] < row[v0 + i + j] ? row[v0 + i + j] : lanes[j];
        float m = lanes[0];
        for (int j = 1; j < 8; ++j) m = m < lanes[j] ? lanes[j] : m;
        if (!(s + (m - lse) > best.back().score)) continue;
      }
      for (int64_t i = 0; i < n; ++i) {
        const Candidate c{s + (row[v0 + i] - lse), k * V + v0 + i};
        if (!(c.score > ninf)) continue;  // -inf and NaN
        if (static_cast<int64_t>(best.size()) == count) {
          if (!(c.score > best.back().score)) continue;
          best.pop_back();
        }
        best.insert(std::upper_bound(best.begin(), best.end(), c, before), c);
      }
    }
  }
}

}  // namespace

std::vector<std::vector<Candidate>> best_candidates(const torch::Tensor& logp, const std::vector<float>& row_score,
                                                    int64_t beam, int64_t count, const std::vector<float>& row_shift) {
  TORCH_CHECK(logp.dim() == 2 && beam > 0 && logp.size(0) % beam == 0 &&
                  static_cast<int64_t>(row_score.size()) == logp.size(0) &&
                  (row_shift.empty() || row_shift.size() == row_score.size()),
              "best_candidates: logp must be [A * beam, V] with one score (and shift, if any) per row");
  auto lp = logp.to(torch::kCPU, torch::kFloat).contiguous();
  const int64_t sentences = lp.size(0) / beam, V = lp.size(1);
  std::vector<std::vector<Candidate>> out(sentences);
  if (count <= 0) return out;
  const float* data = lp.data_ptr<float>();
  at::parallel_for(0, sentences, 1, [&](int64_t begin, int64_t end) {
    for (int64_t a = begin; a < end; ++a) {
      out[a].reserve(count + 1);
      scan(data + a * beam * V, V, beam, row_score.data() + a * beam,
           row_shift.empty() ? nullptr : row_shift.data() + a * beam, count, out[a]);
    }
  });
  return out;
}

}  // namespace parla::decode

#include "decode/greedy_choice.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <torch/torch.h>

#include "decode/step_constraints.h"
#include "text/special_ids.h"

namespace parla::decode {

// target_clones: one build, the loop vectorised for the CPU it runs on.
__attribute__((target_clones("avx512f", "avx2", "default")))
RowTop row_top(const float* x, int64_t n) {
  // Per lane: the best value, its first index and the best of the lane's other values (one pass, no reduction
  // inside the loop); the lanes are merged at the end.
  constexpr int kLanes = 16;
  typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));
  typedef int32_t Ints __attribute__((vector_size(kLanes * sizeof(float))));
  const float ninf = -std::numeric_limits<float>::infinity();
  Lanes best = Lanes{} + ninf, second = best;
  Ints at = {}, nan = {}, index = {};
  for (int l = 0; l < kLanes; ++l) index[l] = l;
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    Lanes v;
    std::memcpy(&v, x + j, sizeof v);
    nan |= v != v;
    const Ints above = v > best;
    second = above ? best : (second < v ? v : second);  // a tie with the best lands here: second == best
    best = above ? v : best;
    at = above ? index : at;
    index += kLanes;
  }
  RowTop top{ninf, 0, ninf, false};
  auto take = [&](float value, int64_t i, float runner_up) {
    // Candidates arrive in lane order, not index order: the first index among equal bests wins.
    if (value > top.best || (value == top.best && i < top.index)) {
      top.second = std::max(top.second, top.best);
      top.best = value;
      top.index = i;
    } else {
      top.second = std::max(top.second, value);
    }
    top.second = std::max(top.second, runner_up);
  };
  for (int l = 0; l < kLanes; ++l) {
    if (j > 0) take(best[l], at[l], second[l]);
    top.nan = top.nan || nan[l] != 0;
  }
  for (; j < n; ++j) {
    if (std::isnan(x[j])) top.nan = true;
    take(x[j], j, ninf);
  }
  return top;
}

std::vector<int64_t> greedy_tokens_from_logits(const torch::Tensor& logits, int64_t step,
                                               const std::vector<int64_t>& max_len, int64_t min_length,
                                               int64_t start_id) {
  TORCH_CHECK(logits.dim() == 2 && logits.device().is_cpu() && logits.scalar_type() == torch::kFloat &&
                  logits.is_contiguous() && logits.size(0) == static_cast<int64_t>(max_len.size()),
              "greedy_tokens_from_logits: logits must be contiguous float [N, V] on the CPU with N limits");
  const int64_t N = logits.size(0), V = logits.size(1);
  std::vector<int64_t> tokens(static_cast<size_t>(N), -1);
  // log V <= 17 bounds the log-sum-exp term of every row's rounding only below 2^24 entries.
  if (V == 0 || V >= (int64_t{1} << 24)) return tokens;
  const float* x = logits.data_ptr<float>();
  for (int64_t r = 0; r < N; ++r) {
    if (step >= max_len[static_cast<size_t>(r)]) {  // the maximum length forces EOS, whatever its score
      tokens[static_cast<size_t>(r)] = parla::kEosId;
      continue;
    }
    const RowTop top = row_top(x + r * V, V);
    const bool forbidden = top.index == parla::kPadId || (top.index == start_id && start_id != parla::kEosId) ||
                           (top.index == parla::kEosId && step < min_length);
    if (top.nan || !std::isfinite(top.best) || forbidden) continue;
    const float tau = (std::fabs(top.best) + 32.0f) * 0x1p-18f;
    if (top.second >= top.best - tau) continue;
    tokens[static_cast<size_t>(r)] = top.index;
  }
  return tokens;
}

torch::Tensor greedy_choice(const torch::Tensor& logits, int64_t step, const std::vector<int64_t>& max_len,
                            int64_t min_length, int64_t start_id) {
  auto chosen = greedy_tokens_from_logits(logits, step, max_len, min_length, start_id);
  std::vector<int64_t> open, open_len;
  for (size_t r = 0; r < chosen.size(); ++r)
    if (chosen[r] < 0) {
      open.push_back(static_cast<int64_t>(r));
      open_len.push_back(max_len[r]);
    }
  if (!open.empty()) {
    auto logp = torch::log_softmax(logits.index_select(0, torch::tensor(open, torch::kLong)), -1);
    constrain_step(logp, step, open_len, min_length, start_id);
    auto best = std::get<1>(logp.max(1)).to(torch::kLong).contiguous();
    const int64_t* b = best.data_ptr<int64_t>();
    for (size_t i = 0; i < open.size(); ++i) chosen[static_cast<size_t>(open[i])] = b[i];
  }
  return torch::tensor(chosen, torch::kLong);
}

}  // namespace parla::decode

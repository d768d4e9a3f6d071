#include "decode/beam_candidates_device.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <torch/torch.h>

namespace parla::decode {

std::pair<torch::Tensor, torch::Tensor> select_candidates(const torch::Tensor& logp, const torch::Tensor& row_score,
                                                          int64_t beam, int64_t count) {
  TORCH_CHECK(logp.dim() == 2 && beam > 0 && logp.size(0) % beam == 0 && row_score.dim() == 1 &&
                  row_score.size(0) == logp.size(0),
              "select_candidates: logp must be [A * beam, V] with one score per row");
  const float ninf = -std::numeric_limits<float>::infinity();
  const int64_t A = logp.size(0) / beam, W = beam * logp.size(1);
  const int64_t c = std::max<int64_t>(0, std::min(count, W));
  const auto long_opts = torch::dtype(torch::kLong).device(logp.device());
  if (c == 0 || A == 0)
    return {torch::empty({A, c}, logp.options().dtype(torch::kFloat)), torch::empty({A, c}, long_opts)};

  // The same float sum as the scan (fl(s + log p)); NaN becomes -inf, since topk ranks NaN above everything.
  auto total = (row_score.to(logp.device(), torch::kFloat).unsqueeze(1) + logp.to(torch::kFloat)).view({A, W});
  total.masked_fill_(total.isnan(), ninf);

  // topk alone picks an arbitrary subset among entries equal to the c-th value. Its c-th value is exact, though:
  // every entry above it is a candidate, and of the entries equal to it the lowest flat indices fill the places
  // left (cumsum counts them in index order). A -inf c-th value means fewer than c candidates: only the finite
  // entries (those above it) are kept.
  auto kth = std::get<0>(total.topk(c, 1, /*largest=*/true, /*sorted=*/false)).amin(1, /*keepdim=*/true);
  auto above = total > kth;
  auto at = total.eq(kth).logical_and_(kth > ninf);
  auto places = c - above.sum(1, /*keepdim=*/true);
  auto keep = above.logical_or_(at.logical_and_(at.cumsum(1, torch::kLong) <= places));

  // Exactly the kept entries are above -inf, so a second topk returns them (padded with -inf when fewer), in
  // some order; the total order (score descending, then index ascending) comes from sorting that small
  // [A, c] result by index, then stably by score.
  auto picked = total.masked_fill_(keep.logical_not_(), ninf).topk(c, 1, true, false);
  auto by_index = std::get<0>(std::get<1>(picked).sort(1));
  auto scores = std::get<0>(picked).gather(1, std::get<1>(std::get<1>(picked).sort(1)));
  auto order = std::get<1>(scores.sort(/*stable=*/true, 1, /*descending=*/true));
  return {scores.gather(1, order), by_index.gather(1, order)};
}

std::vector<std::vector<Candidate>> best_candidates_tensor(const torch::Tensor& logp, const torch::Tensor& row_score,
                                                           int64_t beam, int64_t count) {
  auto [scores, index] = select_candidates(logp, row_score, beam, count);
  const int64_t A = scores.size(0), c = scores.size(1);
  std::vector<std::vector<Candidate>> out(A);
  if (c == 0) return out;
  // One transfer: the float scores travel bit for bit inside int64s next to the indices.
  auto packed = torch::cat({index, scores.contiguous().view(torch::kInt).to(torch::kLong)}, 1)
                    .to(torch::kCPU)
                    .contiguous();
  const int64_t* p = packed.data_ptr<int64_t>();
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t a = 0; a < A; ++a) {
    const int64_t* row = p + a * 2 * c;
    out[a].reserve(c);
    for (int64_t j = 0; j < c; ++j) {
      const auto bits = static_cast<int32_t>(row[c + j]);
      float score;
      std::memcpy(&score, &bits, sizeof score);
      if (!(score > ninf)) break;  // the padding of a sentence with fewer candidates
      out[a].push_back({score, row[j]});
    }
  }
  return out;
}

}  // namespace parla::decode

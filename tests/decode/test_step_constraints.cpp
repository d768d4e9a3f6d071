// decode/step_constraints.h against its rules written out element by element: PAD and the start token never
// output (unless the start token is EOS, which still ends a sentence), EOS forbidden below the minimum length and
// forced (with its own log-probability, 0 when it had none) at a row's maximum, a target prefix's token forced
// (scored 0) before that; the CPU's direct stores and the tensor-op path (any other layout or device) agree.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include <torch/torch.h>

#include "decode/step_constraints.h"
#include "text/special_ids.h"

using namespace parla::decode;

namespace {

const float kNinf = -std::numeric_limits<float>::infinity();

// What row r, token t must hold after the constraints, from the original value.
// `prefixed`: the token a target prefix forces at the row's step, or -1.
float expected(float original, float original_eos, int64_t t, bool forced, bool short_row, int64_t start_id,
               int64_t prefixed) {
  if (forced) {
    if (t != parla::kEosId) return kNinf;
    return std::isfinite(original_eos) ? original_eos : 0.0f;
  }
  if (prefixed >= 0) return t == prefixed ? 0.0f : kNinf;
  if (t == parla::kPadId || (t == start_id && start_id != parla::kEosId)) return kNinf;  // EOS still ends
  if (t == parla::kEosId && short_row) return kNinf;
  return original;
}

// logp [N, V] in the CPU's contiguous layout (direct stores) or as a transposed view (the tensor ops).
torch::Tensor layout(const torch::Tensor& values, bool contiguous) {
  return contiguous ? values.clone() : values.t().contiguous().t();
}

}  // namespace

TEST_CASE("constrain_step applies its rules on the direct CPU path and the tensor-op path alike") {
  torch::manual_seed(4);
  const int64_t N = 6, V = 11;
  auto original = torch::log_softmax(torch::randn({N, V}), -1);
  original[3][parla::kEosId] = kNinf;  // a forced row whose EOS had no probability: forced to 0
  const std::vector<int64_t> max_len = {9, 4, 9, 4, 9, 9};
  for (int64_t start_id : {int64_t{parla::kBosId}, int64_t{parla::kPadId}, int64_t{parla::kEosId}}) {
    for (const std::vector<int64_t>& prefix : {std::vector<int64_t>{}, std::vector<int64_t>{7, 5, 9}}) {
      auto prefixed = [&](int64_t step) { return step < static_cast<int64_t>(prefix.size()) ? prefix[step] : -1; };
      for (int64_t step : {2, 4}) {
        for (bool contiguous : {true, false}) {
          INFO("start " << start_id << ", prefix of " << prefix.size() << ", step " << step
                        << (contiguous ? ", direct" : ", ops"));
          const int64_t min_length = 3;
          auto logp = layout(original, contiguous);
          REQUIRE(logp.is_contiguous() == contiguous);
          constrain_step(logp, step, max_len, min_length, start_id, prefix);
          auto per_row = layout(original, contiguous);
          const std::vector<int64_t> steps = {step, step, 1, 5, step, 0};  // rows at different steps
          constrain_step(per_row, steps, max_len, min_length, start_id, prefix);
          for (int64_t r = 0; r < N; ++r) {
            for (int64_t t = 0; t < V; ++t) {
              const float o = original[r][t].item<float>(), eos = original[r][parla::kEosId].item<float>();
              CHECK(logp[r][t].item<float>() ==
                    expected(o, eos, t, step >= max_len[r], step < min_length, start_id, prefixed(step)));
              CHECK(per_row[r][t].item<float>() == expected(o, eos, t, steps[r] >= max_len[r], steps[r] < min_length,
                                                            start_id, prefixed(steps[r])));
            }
          }
        }
      }
    }
  }
}

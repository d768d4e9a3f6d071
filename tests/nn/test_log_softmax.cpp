// The decoder's log_softmax (nn/log_softmax.h) against LibTorch's, and the log-sum-exp a search reads logits with
// against the written-out log-probabilities, bit for bit.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include <torch/torch.h>

#include "nn/log_softmax.h"

using parla::nn::log_softmax_rows;
using parla::nn::row_log_sum_exp;

TEST_CASE("log_softmax_rows matches LibTorch's log_softmax on the CPU kernel's rows and falls back elsewhere") {
  torch::manual_seed(4);
  for (int64_t V : {7, 64, 1000, 8000}) {
    INFO("V " << V);
    auto logits = torch::randn({13, V}) * 6;
    auto got = log_softmax_rows(logits), want = torch::log_softmax(logits, -1);
    CHECK(torch::allclose(got, want, 1e-5, 2e-5));
    // A row alone and in a batch of 13, split over threads: the same bits.
    for (int64_t r : {0, 6, 12}) CHECK(torch::equal(log_softmax_rows(logits.narrow(0, r, 1)), got.narrow(0, r, 1)));
  }
  // Not the kernel's (non-contiguous, double, 3-D): LibTorch's own result.
  auto x = torch::randn({20, 9});
  CHECK(torch::equal(log_softmax_rows(x.t()), torch::log_softmax(x.t(), -1)));
  auto d = torch::randn({4, 30}, torch::kDouble);
  CHECK(torch::equal(log_softmax_rows(d), torch::log_softmax(d, -1)));
  CHECK_FALSE(parla::nn::log_softmax_kernel_applies(torch::randn({2, 3, 4})));
}

TEST_CASE("logits minus row_log_sum_exp are log_softmax_rows to the bit, for the rows asked for") {
  torch::manual_seed(5);
  auto logits = (torch::randn({11, 3001}) * 4).contiguous();
  std::vector<bool> need(11, true);
  need[3] = need[10] = false;
  auto lse = row_log_sum_exp(logits, need);
  auto logp = log_softmax_rows(logits);
  REQUIRE(lse.size() == 11);
  CHECK(lse[3] == 0.0f);
  CHECK(lse[10] == 0.0f);
  for (int64_t r = 0; r < 11; ++r) {
    if (!need[r]) continue;
    auto shifted = logits[r] - lse[r];
    CHECK(std::memcmp(shifted.data_ptr<float>(), logp[r].contiguous().data_ptr<float>(), sizeof(float) * 3001) == 0);
  }
  CHECK_THROWS(row_log_sum_exp(logits.t(), need));
  CHECK_THROWS(row_log_sum_exp(logits, std::vector<bool>(3, true)));
}

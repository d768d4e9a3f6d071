// The tensor-op candidate selection against brute force and against the scan it stands in for: the same
// candidates in the same order, ties (a coarse grid of values) broken by the lowest flat index also at the
// count-th place, dead rows, -inf and NaN never chosen, vocabularies that are not a multiple of the scan's
// chunk, and counts up to the whole beam x vocabulary.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <torch/torch.h>

#include "decode/beam_candidates.h"
#include "decode/beam_candidates_device.h"
#include "support/cuda.h"

using parla::decode::best_candidates;
using parla::decode::best_candidates_tensor;
using parla::decode::Candidate;
using parla::decode::select_candidates;

namespace {

std::vector<Candidate> brute_force_device(const torch::Tensor& logp, const std::vector<float>& row_score, int64_t beam,
                                   int64_t a, int64_t count) {
  const int64_t V = logp.size(1);
  auto acc = logp.accessor<float, 2>();
  std::vector<Candidate> all;
  for (int64_t k = 0; k < beam; ++k)
    for (int64_t v = 0; v < V; ++v) {
      const float total = row_score[a * beam + k] + acc[a * beam + k][v];
      if (total > -std::numeric_limits<float>::infinity()) all.push_back({total, k * V + v});
    }
  std::sort(all.begin(), all.end(), [](const Candidate& x, const Candidate& y) {
    return x.score != y.score ? x.score > y.score : x.index < y.index;
  });
  if (static_cast<int64_t>(all.size()) > count) all.resize(count);
  return all;
}

struct Case {
  torch::Tensor logp;
  std::vector<float> row_score;
  int64_t beam, count;
};

// Random cases on a coarse grid (ties everywhere), with dead rows, -inf and NaN log-probs, a NaN row score, and
// vocabularies and counts at their edges.
Case random_case(std::mt19937& rng, int trial) {
  const float ninf = -std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t Vs[] = {1, 2, 7, 63, 64, 65, 130, 300};
  Case c;
  c.beam = 1 + static_cast<int64_t>(rng() % 6);
  const int64_t sentences = 1 + static_cast<int64_t>(rng() % 4), V = Vs[rng() % 8];
  const int64_t W = c.beam * V;
  switch (rng() % 4) {  // k near V (and beyond it) as well as beam search's 2 x beam
    case 0: c.count = W; break;
    case 1: c.count = std::max<int64_t>(1, W - static_cast<int64_t>(rng() % 3)); break;
    case 2: c.count = W + 2; break;
    default: c.count = 2 * c.beam;
  }
  const int grid = trial % 2 ? 3 : 40;  // 3: almost every total ties
  c.logp = (torch::randint(-grid, 1, {sentences * c.beam, V}, torch::kFloat) / 4.0f).contiguous();
  c.row_score.resize(sentences * c.beam);
  for (auto& s : c.row_score) s = -static_cast<float>(rng() % 4) / 4.0f;
  auto acc = c.logp.accessor<float, 2>();
  for (int64_t r = 0; r < sentences * c.beam; ++r) {
    if (rng() % 5 == 0) c.row_score[r] = ninf;  // a dead row
    if (rng() % 7 == 0) c.row_score[r] = nan;
    for (int64_t v = 0; v < V; ++v) {
      const auto u = rng() % 10;
      if (u == 0) acc[r][v] = ninf;
      if (u == 1) acc[r][v] = nan;
    }
  }
  if (trial % 11 == 0)  // a sentence with no candidate at all
    for (int64_t k = 0; k < c.beam; ++k) c.row_score[k] = ninf;
  return c;
}

void require_equal(const std::vector<Candidate>& got, const std::vector<Candidate>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t j = 0; j < want.size(); ++j) {
    INFO("place " << j);
    CHECK(got[j].index == want[j].index);
    CHECK(got[j].score == want[j].score);
  }
}

}  // namespace

TEST_CASE("tensor-op beam candidates equal brute force and the scan on random cases with ties, -inf and NaN") {
  std::mt19937 rng(7);
  torch::manual_seed(7);
  for (int trial = 0; trial < 400; ++trial) {
    auto c = random_case(rng, trial);
    auto scores = torch::tensor(c.row_score, torch::kFloat);
    auto got = best_candidates_tensor(c.logp, scores, c.beam, c.count);
    auto scan = best_candidates(c.logp, c.row_score, c.beam, c.count);
    const int64_t sentences = c.logp.size(0) / c.beam;
    REQUIRE(static_cast<int64_t>(got.size()) == sentences);
    for (int64_t a = 0; a < sentences; ++a) {
      INFO("trial " << trial << " sentence " << a << " beam " << c.beam << " V " << c.logp.size(1) << " count "
                    << c.count);
      auto want = brute_force_device(c.logp, c.row_score, c.beam, a, c.count);
      require_equal(got[a], want);
      require_equal(scan[a], want);
    }
  }
}

TEST_CASE("tensor-op beam candidates break a tie at the count-th place by the lowest flat index") {
  // Sentence 0: totals 0, -1 (x5, at indices 1, 3, 4, 6, 7), count 3: indices 1 and 3 take the two places left.
  auto logp = torch::tensor({-9.0f, -1.0f, -9.0f, -1.0f, -1.0f, -9.0f, -1.0f, -1.0f, 0.0f}).view({1, 9});
  auto [scores, index] = select_candidates(logp, torch::zeros({1}), 1, 3);
  CHECK(index[0][0].item<int64_t>() == 8);
  CHECK(index[0][1].item<int64_t>() == 1);
  CHECK(index[0][2].item<int64_t>() == 3);
  CHECK(scores[0][2].item<float>() == -1.0f);
}

TEST_CASE("tensor-op beam candidates pad a sentence with fewer candidates than asked with -inf") {
  const float ninf = -std::numeric_limits<float>::infinity();
  auto logp = torch::tensor({ninf, -2.0f, std::numeric_limits<float>::quiet_NaN(), -1.0f}).view({2, 2});
  auto [scores, index] = select_candidates(logp, torch::tensor({0.0f, ninf}), 2, 3);
  REQUIRE(scores.sizes() == torch::IntArrayRef({1, 3}));
  CHECK(index[0][0].item<int64_t>() == 1);
  CHECK(scores[0][0].item<float>() == -2.0f);
  CHECK(scores[0][1].item<float>() == ninf);
  auto host = best_candidates_tensor(logp, torch::tensor({0.0f, ninf}), 2, 3);
  REQUIRE(host[0].size() == 1);
}

TEST_CASE("tensor-op beam candidates on CUDA equal the CPU's", "[cuda]") {
  PARLA_REQUIRE_CUDA();
  std::mt19937 rng(3);
  torch::manual_seed(3);
  for (int trial = 0; trial < 100; ++trial) {
    auto c = random_case(rng, trial);
    auto scores = torch::tensor(c.row_score, torch::kFloat);
    auto cpu = best_candidates_tensor(c.logp, scores, c.beam, c.count);
    auto gpu = best_candidates_tensor(c.logp.to(torch::kCUDA), scores.to(torch::kCUDA), c.beam, c.count);
    REQUIRE(gpu.size() == cpu.size());
    for (size_t a = 0; a < cpu.size(); ++a) {
      INFO("trial " << trial << " sentence " << a);
      require_equal(gpu[a], cpu[a]);
    }
  }
}

// Beam candidate selection against brute force: every (beam, token) total, sorted by score descending and
// index ascending, first `count` kept.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <torch/torch.h>

#include "decode/beam_candidates.h"

using parla::decode::best_candidates;
using parla::decode::Candidate;

namespace {

std::vector<Candidate> brute_force(const torch::Tensor& logp, const std::vector<float>& row_score, int64_t beam,
                                   int64_t a, int64_t count) {
  const int64_t V = logp.size(1);
  std::vector<Candidate> all;
  for (int64_t k = 0; k < beam; ++k)
    for (int64_t v = 0; v < V; ++v) {
      float total = row_score[a * beam + k] + logp[a * beam + k][v].item<float>();
      if (std::isfinite(total)) all.push_back({total, k * V + v});
    }
  std::sort(all.begin(), all.end(), [](const Candidate& x, const Candidate& y) {
    return x.score != y.score ? x.score > y.score : x.index < y.index;
  });
  if (static_cast<int64_t>(all.size()) > count) all.resize(count);
  return all;
}

}  // namespace

TEST_CASE("beam candidates equal brute force, with ties, dead rows, -inf and NaN log-probs") {
  const float ninf = -std::numeric_limits<float>::infinity();
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t beam = 1 + trial % 5, sentences = 1 + trial % 3;
    const int64_t V = trial % 2 ? 300 : 7;  // long rows use the chunk skipping, short ones do not
    const int64_t count = std::min<int64_t>(2 * beam, beam * V);
    // Log-probs on a coarse grid, so that equal totals (ties) are common.
    auto logp = (torch::randint(-40, 1, {sentences * beam, V}, torch::kFloat) / 4.0f).contiguous();
    std::vector<float> row_score(sentences * beam);
    for (auto& s : row_score) s = -static_cast<float>(rng() % 8) / 4.0f;
    row_score[0] = trial % 3 == 0 ? ninf : row_score[0];  // a dead row
    logp[0][V - 1] = ninf;
    logp[sentences * beam - 1][rng() % V] = std::numeric_limits<float>::quiet_NaN();
    if (V > 64) logp[sentences * beam - 1][64] = std::numeric_limits<float>::quiet_NaN();  // first of a chunk
    auto got = best_candidates(logp, row_score, beam, count);
    REQUIRE(static_cast<int64_t>(got.size()) == sentences);
    for (int64_t a = 0; a < sentences; ++a) {
      auto want = brute_force(logp, row_score, beam, a, count);
      INFO("trial " << trial << " sentence " << a);
      REQUIRE(got[a].size() == want.size());
      for (size_t j = 0; j < want.size(); ++j) {
        CHECK(got[a][j].index == want[j].index);
        CHECK(got[a][j].score == want[j].score);
      }
    }
  }
}

TEST_CASE("beam candidates: a large value after a NaN in the same lane is still found") {
  auto logp = torch::full({1, 256}, -10.0f);
  logp[0][128] = std::numeric_limits<float>::quiet_NaN();
  logp[0][136] = -1.0f;  // same lane of the same chunk as the NaN
  logp[0][3] = -5.0f;
  auto got = best_candidates(logp, {0.0f}, 1, 2);
  REQUIRE(got[0].size() == 2);
  CHECK(got[0][0].index == 136);
  CHECK(got[0][1].index == 3);
}

TEST_CASE("beam candidates from logits and a shift per row are those of the written-out log-probabilities, bit for "
          "bit") {
  // Logits whose rows are shifted by arbitrary constants: row r's log-probabilities are logits[r] - shift[r]. The
  // reference is brute force over that tensor, written out; the shifted scan must neither skip a chunk it should
  // read nor score a candidate differently.
  const float ninf = -std::numeric_limits<float>::infinity();
  std::mt19937 rng(12);
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t beam = 1 + trial % 5, sentences = 1 + trial % 3, V = trial % 2 ? 700 : 9;
    const int64_t count = std::min<int64_t>(2 * beam, beam * V);
    auto logits = (torch::randn({sentences * beam, V}) * 3).contiguous();
    std::vector<float> shift(sentences * beam), row_score(sentences * beam);
    for (auto& c : shift) c = static_cast<float>(rng() % 2000) / 97.0f - 5.0f;
    for (auto& s : row_score) s = -static_cast<float>(rng() % 8) / 3.0f;
    if (trial % 4 == 0) row_score[0] = ninf;
    logits[sentences * beam - 1][rng() % V] = ninf;  // a forbidden token
    auto logp = logits.clone();
    for (int64_t r = 0; r < sentences * beam; ++r) logp[r] -= shift[r];
    auto got = best_candidates(logits, row_score, beam, count, shift);
    auto plain = best_candidates(logp, row_score, beam, count);
    REQUIRE(got.size() == plain.size());
    for (int64_t a = 0; a < sentences; ++a) {
      auto want = brute_force(logp, row_score, beam, a, count);
      INFO("trial " << trial << " sentence " << a);
      REQUIRE(got[a].size() == want.size());
      REQUIRE(plain[a].size() == want.size());
      for (size_t j = 0; j < want.size(); ++j) {
        CHECK(got[a][j].index == want[j].index);
        CHECK(std::memcmp(&got[a][j].score, &want[j].score, sizeof(float)) == 0);
        CHECK(plain[a][j].index == want[j].index);
      }
    }
  }
  CHECK_THROWS(best_candidates(torch::zeros({2, 5}), {0.0f, 0.0f}, 1, 2, {0.0f}));
}

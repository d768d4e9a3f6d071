// Greedy search's choice from the logits (decode/greedy_choice.h) against what it replaces: ATen's log-softmax,
// the step constraints and the first maximum, row by row; the row scan against brute force; and whole greedy
// searches without scores against searches with them.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include <torch/torch.h>

#include "decode/greedy_choice.h"
#include "decode/greedy_search.h"
#include "decode/step_constraints.h"
#include "models/decoding_kind.h"
#include "models/factory.h"
#include "models/tiny_config.h"
#include "models/transformer.h"
#include "nn/log_softmax.h"

using namespace parla::decode;

namespace {

const float kInf = std::numeric_limits<float>::infinity();

// What greedy search over log-probabilities picks (single_path_search before greedy_choice existed).
std::vector<int64_t> reference(const torch::Tensor& logits, int64_t step, const std::vector<int64_t>& max_len,
                               int64_t min_length, int64_t start_id) {
  auto logp = torch::log_softmax(logits, -1);
  constrain_step(logp, step, max_len, min_length, start_id);
  auto best = std::get<1>(logp.max(1)).to(torch::kLong).contiguous();
  return std::vector<int64_t>(best.data_ptr<int64_t>(), best.data_ptr<int64_t>() + best.numel());
}

// The definition, term by term: the largest non-NaN entry, its first index, the largest non-NaN entry elsewhere.
RowTop brute_top(const std::vector<float>& x) {
  RowTop t{-kInf, 0, -kInf, false};
  for (float v : x) {
    if (std::isnan(v)) t.nan = true;
    else t.best = std::max(t.best, v);
  }
  while (t.index < static_cast<int64_t>(x.size()) && !(x[static_cast<size_t>(t.index)] == t.best)) ++t.index;
  for (size_t j = 0; j < x.size(); ++j)
    if (static_cast<int64_t>(j) != t.index && !std::isnan(x[j])) t.second = std::max(t.second, x[j]);
  return t;
}

}  // namespace

TEST_CASE("row_top finds the first maximum, the best other entry and NaNs as brute force does", "[greedy]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(0, 5);
  std::normal_distribution<float> normal(0.f, 2.f);
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 90);  // whole vectors and tails
    std::vector<float> x(static_cast<size_t>(n));
    const bool ties = trial % 3 == 0;  // few distinct values: ties within and across lanes
    for (auto& v : x) v = ties ? static_cast<float>(small(rng)) : normal(rng);
    if (trial % 7 == 0) x[rng() % n] = -kInf;
    if (trial % 11 == 0) x[rng() % n] = std::nanf("");
    if (trial % 13 == 0) x[rng() % n] = kInf;
    const RowTop got = row_top(x.data(), n), want = brute_top(x);
    INFO("trial " << trial << ", n " << n);
    REQUIRE(got.nan == want.nan);
    if (want.nan) continue;  // undecided rows: only the flag matters
    CHECK(got.best == want.best);
    CHECK(got.index == want.index);
    CHECK(got.second == want.second);
  }
}

TEST_CASE("greedy tokens from the logits are those of the log-softmax under the step constraints", "[greedy]") {
  std::mt19937 rng(11);
  for (int64_t V : {37, 1000, 8003}) {
    for (int trial = 0; trial < 12; ++trial) {
      const int64_t N = 64, step = trial % 4, min_length = trial % 3 == 0 ? 2 : 0;
      const int64_t start_id = trial % 2 ? parla::kBosId : parla::kPadId;
      torch::manual_seed(100 + trial);
      const float scale = trial % 4 == 3 ? 20.f : 3.f, offset = trial % 5 == 4 ? 200.f : 0.f;
      auto logits = torch::randn({N, V}) * scale + offset;
      float* x = logits.data_ptr<float>();
      std::vector<int64_t> max_len(N);
      for (auto& m : max_len) m = 1 + static_cast<int64_t>(rng() % 5);  // some rows at their limit
      std::vector<char> planted(N, 0);
      for (int64_t r = 0; r < N; ++r) {
        float* row = x + r * V;
        const int64_t top = 4 + static_cast<int64_t>(rng() % (V - 4));
        const int64_t other = 4 + static_cast<int64_t>(rng() % (V - 4));
        float row_max = -kInf;
        for (int64_t j = 0; j < V; ++j) row_max = std::max(row_max, row[j]);
        switch (r % 16) {
          case 0: {  // the best logit a few units in the last place above the second
            row[top] = row_max + 1;
            row[other] = row[top];
            for (int u = 0; u < 1 + static_cast<int>(rng() % 3); ++u) row[other] = std::nextafter(row[other], -kInf);
            planted[r] = 1;
            break;
          }
          case 1:  // an exact tie
            row[top] = row[other] = 2 * scale + offset;
            planted[r] = 1;
            break;
          case 2:  // a forbidden token holds the largest logit
            row[r % 2 ? parla::kPadId : start_id] = 4 * scale + offset;
            planted[r] = 1;
            break;
          case 3:  // EOS the largest: forbidden below the minimum length
            row[parla::kEosId] = 4 * scale + offset;
            planted[r] = step < min_length;
            break;
          case 4:
            row[top] = std::nanf("");
            planted[r] = 1;
            break;
          case 5:
            row[top] = kInf;
            planted[r] = 1;
            break;
          case 6:
            row[top] = -kInf;
            break;
          case 7:  // logits near 0 (L ~ log V): the best two 2e-8 apart merge in the log-softmax
            for (int64_t j = 0; j < V; ++j) row[j] *= 1e-4f;
            row[top] = row_max * 1e-4f + 1e-4f;
            row[other] = row[top] - 2e-8f;
            planted[r] = 1;
            break;
          default:
            break;
        }
      }
      INFO("V " << V << ", trial " << trial);
      const auto want = reference(logits, step, max_len, min_length, start_id);
      const auto fast = greedy_tokens_from_logits(logits, step, max_len, min_length, start_id);
      auto chosen = greedy_choice(logits, step, max_len, min_length, start_id);
      REQUIRE(chosen.numel() == N);
      for (int64_t r = 0; r < N; ++r) {
        INFO("row " << r);
        CHECK(chosen[r].item<int64_t>() == want[r]);
        if (fast[r] >= 0) CHECK(fast[r] == want[r]);
        // The logits decide every row without a planted trap (a random row's best two logits are far apart),
        // so the fast path is really taken.
        if (!planted[r] && step < max_len[r]) {
          std::vector<float> row(x + r * V, x + (r + 1) * V);
          const auto top = brute_top(row);
          const float tau = (std::fabs(top.best) + 32.0f) * 0x1p-18f;
          const bool forbidden = top.index == parla::kPadId || top.index == start_id ||
                                 (top.index == parla::kEosId && step < min_length);
          if (!forbidden && top.second < top.best - 2 * tau) CHECK(fast[r] >= 0);
        }
        if (step >= max_len[r]) CHECK(fast[r] == parla::kEosId);
      }
    }
  }
}

TEST_CASE("greedy_choice forbids exactly what constrain_step forbids: every token as the clear best logit",
          "[greedy]") {
  // The fast path knows constrain_step's rules by name (PAD, the start token, EOS below the minimum length, EOS at
  // the limit); a rule added there and not here would make a token that is the logits' clear best differ.
  const int64_t V = 40;
  for (int64_t start_id : {int64_t{parla::kBosId}, int64_t{parla::kPadId}}) {
    for (int64_t step : {0, 3, 6}) {
      auto logits = torch::zeros({V, V});
      for (int64_t t = 0; t < V; ++t) logits[t][t] = 5.f;  // row t: token t far ahead of the rest
      const std::vector<int64_t> max_len(V, 6);            // step 6: every row at its limit
      INFO("start " << start_id << ", step " << step);
      const auto want = reference(logits, step, max_len, 4, start_id);
      const auto fast = greedy_tokens_from_logits(logits, step, max_len, 4, start_id);
      auto chosen = greedy_choice(logits, step, max_len, 4, start_id);
      for (int64_t t = 0; t < V; ++t) {
        INFO("token " << t);
        CHECK(chosen[t].item<int64_t>() == want[t]);
        if (fast[t] >= 0) CHECK(fast[t] == want[t]);
        CHECK((fast[t] >= 0) == (want[t] == t || step >= 6));  // decided wherever the best is allowed
      }
    }
  }
}

TEST_CASE("a near tie that the log-softmax merges is left to it, and the log-softmax's token is chosen", "[greedy]") {
  // 999 logits at 0 and two near 0.5, one unit in the last place apart: L = log(1 + 999 e^-0.5) ~ 6.4, whose unit
  // in the last place (4.8e-7) swallows their difference (6e-8), so the log-softmax ties them and its first
  // maximum is the smaller logit, at index 5, where the logits' is index 10.
  auto logits = torch::zeros({1, 1001});
  logits[0][5] = 0.5f;
  logits[0][10] = std::nextafter(0.5f, 1.f);
  const std::vector<int64_t> max_len{10};
  const auto want = reference(logits, 0, max_len, 0, parla::kBosId);
  REQUIRE(want[0] == 5);  // the case is real: the logits' own first maximum (10) would be wrong
  CHECK(greedy_tokens_from_logits(logits, 0, max_len, 0, parla::kBosId)[0] == -1);
  CHECK(greedy_choice(logits, 0, max_len, 0, parla::kBosId)[0].item<int64_t>() == 5);
}

TEST_CASE("a Transformer's step_logits are what its step normalises, and greedy search without scores returns the "
          "same tokens with NaN scores", "[greedy]") {
  for (std::string kind : {"fp32", "packed", "int8"}) {
    INFO(kind);
    auto cfg = parla::testing::tiny_transformer();
    cfg.dropout = 0;
    torch::manual_seed(3);
    auto model = std::dynamic_pointer_cast<parla::models::TransformerModel>(parla::models::build_seq2seq(cfg, 60, 60));
    model->eval();
    parla::testing::prepare_for_decoding(*model, kind);
    torch::NoGradGuard no_grad;
    auto src = torch::randint(4, 60, {9, 7}, torch::kLong);
    for (int64_t r = 0; r < 9; ++r) {
      const int64_t len = 2 + r % 5;
      src.index_put_({r, torch::indexing::Slice(len, torch::indexing::None)}, parla::kPadId);
      src[r][len] = parla::kEosId;
    }
    auto a = model->start(src), b = model->start(src);
    REQUIRE(model->has_step_logits(*a));
    auto prev = torch::full({9}, model->start_id(), torch::kLong);
    for (int t = 0; t < 4; ++t) {
      auto logp = model->step(prev, *a);
      auto logits = model->step_logits(prev, *b);
      CHECK(torch::equal(parla::nn::log_softmax_rows(logits), logp));
      CHECK(torch::allclose(torch::log_softmax(logits, -1), logp, 1e-5, 2e-5));
      prev = std::get<1>(logp.max(1));
    }

    SearchOptions with, without;
    with.max_length_factor = without.max_length_factor = 3;
    without.scores = false;
    for (int64_t rows : {1, 9}) {
      auto part = src.narrow(0, 0, rows);
      auto x = greedy_search(*model, part, with), y = greedy_search(*model, part, without);
      REQUIRE(x.size() == y.size());
      for (size_t i = 0; i < x.size(); ++i) {
        REQUIRE(y[i].size() == 1);
        CHECK(y[i][0].tokens == x[i][0].tokens);
        CHECK(std::isnan(y[i][0].score));
        CHECK(std::isfinite(x[i][0].score));
      }
    }
  }
}

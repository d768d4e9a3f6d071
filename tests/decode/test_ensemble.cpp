#include <catch2/catch.hpp>

#include "core/error.h"
#include "decode/ensemble.h"
#include "decode/search.h"
#include "toy_model.h"

using namespace parla;
using namespace parla::decode;
using namespace parla::decode::testing;

TEST_CASE("an ensemble of one model twice translates exactly like that model", "[ensemble]") {
  auto model = std::make_shared<ToyModel>(30, 5, 0.3);
  Ensemble twice({model, model});
  auto src = make_source({{4, 5, 6}, {7, 8}, {9, 10, 11, 12, 13}});
  for (int beam : {1, 4}) {
    SearchOptions o;
    o.beam_size = beam;
    o.n_best = beam;
    o.attention = true;
    auto a = search(*model, src, o), b = search(twice, src, o);
    for (size_t i = 0; i < a.size(); ++i) {
      REQUIRE(a[i].size() == b[i].size());
      for (size_t k = 0; k < a[i].size(); ++k) {
        CHECK(a[i][k].tokens == b[i][k].tokens);
        CHECK(a[i][k].score == Approx(b[i][k].score).epsilon(1e-6));
        CHECK(a[i][k].attention == b[i][k].attention);
      }
    }
  }
}

TEST_CASE("an ensemble's step is the mean of its members' log-probabilities", "[ensemble]") {
  auto m1 = std::make_shared<ToyModel>(12, 1, 0.3), m2 = std::make_shared<ToyModel>(12, 2, 0.3);
  Ensemble ens({m1, m2});
  auto src = make_source({{4, 5}});
  auto s = ens.start(src);
  auto prev = torch::full({1}, parla::kBosId, torch::kLong);
  auto got = ens.step(prev, *s, nullptr);
  auto l1 = toy_log_probs({4, 5, parla::kEosId}, {}, 12, 1, 0.3);
  auto l2 = toy_log_probs({4, 5, parla::kEosId}, {}, 12, 2, 0.3);
  for (int64_t v = 0; v < 12; ++v) CHECK(got[0][v].item<float>() == Approx((l1[v] + l2[v]) / 2).epsilon(1e-6));
  CHECK(ens.max_positions() == INT64_MAX);
}

TEST_CASE("an ensemble of models with different vocabularies is refused", "[ensemble]") {
  auto m1 = std::make_shared<ToyModel>(12, 1), m2 = std::make_shared<ToyModel>(13, 2);
  CHECK_THROWS_AS(Ensemble({m1, m2}), DataError);
  CHECK_THROWS_AS(Ensemble({}), DataError);
}

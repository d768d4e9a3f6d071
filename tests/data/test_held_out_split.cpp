#include <catch2/catch.hpp>

#include <cmath>

#include "data/held_out_split.h"

using parla::data::assign_splits;
using parla::data::SelectionSampler;
using parla::data::Split;

TEST_CASE("selection sampling picks exactly k of n, in one pass") {
  for (auto [n, k] : {std::pair<uint64_t, uint64_t>{10, 3}, {1000, 1000}, {1000, 0}, {5, 9}, {0, 4}}) {
    SelectionSampler s(n, k, 42);
    uint64_t picked = 0;
    for (uint64_t i = 0; i < n; ++i) picked += s.next();
    CHECK(picked == std::min(n, k));
  }
}

TEST_CASE("every item is equally likely to be selected (k/n), checked over many seeds") {
  const uint64_t n = 10, k = 3, trials = 20000;
  std::vector<double> hits(n, 0);
  for (uint64_t seed = 0; seed < trials; ++seed) {
    SelectionSampler s(n, k, seed);
    for (uint64_t i = 0; i < n; ++i) hits[i] += s.next();
  }
  // Binomial(trials, 0.3): standard deviation ~65; 5 sigma bounds.
  double expected = trials * double(k) / n, sigma = std::sqrt(trials * 0.3 * 0.7);
  for (double h : hits) CHECK(std::fabs(h - expected) < 5 * sigma);
}

TEST_CASE("uniform_below is unbiased") {
  std::mt19937_64 rng(3);
  std::vector<int> counts(3, 0);
  for (int i = 0; i < 30000; ++i) ++counts[parla::data::uniform_below(rng, 3)];
  for (int c : counts) CHECK(std::abs(c - 10000) < 5 * 82);  // sqrt(30000 * 1/3 * 2/3) ~ 82
}

TEST_CASE("splits hold out exactly the requested sizes, deterministically per seed") {
  auto a = assign_splits(1000, 50, 30, 1);
  auto b = assign_splits(1000, 50, 30, 1);
  auto c = assign_splits(1000, 50, 30, 2);
  CHECK((a == b));
  CHECK((a != c));
  CHECK(std::count(a.begin(), a.end(), Split::kValid) == 50);
  CHECK(std::count(a.begin(), a.end(), Split::kTest) == 30);
  CHECK(std::count(a.begin(), a.end(), Split::kTrain) == 920);
  auto all = assign_splits(10, 8, 8, 1);
  CHECK(std::count(all.begin(), all.end(), Split::kTrain) == 0);
}

namespace held_out_split_test {

// Splits as 0 (train), 1 (valid), 2 (test), which Catch can print.
std::vector<int> codes(const std::vector<Split>& splits) {
  std::vector<int> out;
  for (Split s : splits) out.push_back(static_cast<int>(s));
  return out;
}

}  // namespace held_out_split_test

TEST_CASE("held out from the end: the last test pairs are test, the valid pairs before them valid, capped by n") {
  using held_out_split_test::codes;
  CHECK(codes(parla::data::assign_last_splits(10, 3, 2)) == std::vector<int>{0, 0, 0, 0, 0, 1, 1, 1, 2, 2});
  // Fewer pairs than asked: the test set first, then what is left for validation.
  CHECK(codes(parla::data::assign_last_splits(3, 5, 2)) == std::vector<int>{1, 2, 2});
  CHECK(parla::data::assign_last_splits(0, 1, 1).empty());
}

TEST_CASE("held out by document: ids are matched by prefix, test before valid, unmatched prefixes reported") {
  parla::data::DocumentSplit split({"ep-01-07", "ep-01-08-02"}, {"ep-01-09"});
  CHECK(static_cast<int>(split.of("ep-01-09-03")) == static_cast<int>(Split::kTest));
  CHECK(static_cast<int>(split.of("ep-01-07-05")) == static_cast<int>(Split::kValid));
  CHECK(static_cast<int>(split.of("ep-01-08-01")) == static_cast<int>(Split::kTrain));
  CHECK(static_cast<int>(split.of("ep-00-07-05")) == static_cast<int>(Split::kTrain));
  CHECK(static_cast<int>(split.of("")) == static_cast<int>(Split::kTrain));
  CHECK(split.unmatched() == std::vector<std::string>{"ep-01-08-02"});
  CHECK_THROWS_WITH(parla::data::DocumentSplit({"ep-01"}, {"ep-01-09"}),
                    Catch::Matchers::Contains("overlap"));
  CHECK_THROWS_WITH(parla::data::DocumentSplit({""}, {"ep-01-09"}), Catch::Matchers::Contains("empty"));
}

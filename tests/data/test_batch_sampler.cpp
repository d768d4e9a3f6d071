#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <random>

#include "data/batch_sampler.h"

using namespace parla::data;

namespace {

struct Corpus {
  std::vector<int32_t> src, tgt;
};

Corpus random_corpus(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  // Like real parallel text: target length close to the source length.
  std::uniform_int_distribution<int> len(1, 60), noise(-3, 3);
  Corpus c;
  for (int i = 0; i < n; ++i) {
    int s = len(rng);
    c.src.push_back(s);
    c.tgt.push_back(std::max(1, s + noise(rng)));
  }
  return c;
}

}  // namespace

TEST_CASE("batching keeps every batch within the padded token budget") {
  auto c = random_corpus(2000, 7);
  auto table = filter_by_length(c.src, c.tgt, 1000);
  const int64_t budget = 1024;
  auto plan = plan_epoch(table, budget, 1, 1);
  for (const auto& b : plan) {
    // Independent reference: recompute the padded size from the raw lengths (+1 for </s> and for <s>/</s>).
    int64_t ms = 0, mt = 0;
    for (int64_t id : b) {
      ms = std::max<int64_t>(ms, c.src[id] + 1);
      mt = std::max<int64_t>(mt, c.tgt[id] + 1);
    }
    CHECK(static_cast<int64_t>(b.size()) * (ms + mt) <= budget);
  }
  // Bucketing packs well: mean fill of the budget above 85% (random batching fills about half).
  int64_t real = 0;
  for (const auto& b : plan)
    for (int64_t id : b) real += c.src[id] + c.tgt[id] + 2;
  CHECK(static_cast<double>(real) / (static_cast<double>(plan.size()) * budget) > 0.85);
}

TEST_CASE("batching covers every kept sentence exactly once per epoch") {
  auto c = random_corpus(1500, 3);
  auto table = filter_by_length(c.src, c.tgt, 1000);
  for (int64_t epoch : {1, 2, 5}) {
    auto plan = plan_epoch(table, 500, 42, epoch);
    std::map<int64_t, int> seen;
    for (const auto& b : plan)
      for (int64_t id : b) ++seen[id];
    REQUIRE(seen.size() == 1500);
    for (const auto& [id, n] : seen) CHECK(n == 1);
  }
}

TEST_CASE("batching reshuffles deterministically from the seed and the epoch") {
  auto c = random_corpus(800, 11);
  auto table = filter_by_length(c.src, c.tgt, 1000);
  CHECK(plan_epoch(table, 400, 5, 1) == plan_epoch(table, 400, 5, 1));
  CHECK(plan_epoch(table, 400, 5, 1) != plan_epoch(table, 400, 5, 2));
  CHECK(plan_epoch(table, 400, 5, 1) != plan_epoch(table, 400, 6, 1));
}

TEST_CASE("the length filter drops pairs with a side longer than max_len including </s>") {
  std::vector<int32_t> src = {3, 9, 10, 2}, tgt = {3, 2, 2, 10};
  auto t = filter_by_length(src, tgt, 10);
  CHECK(t.ids == std::vector<int64_t>{0, 1});
  CHECK(t.dropped == 2);
  CHECK(t.src_len == std::vector<int32_t>{4, 10});
}

TEST_CASE("a sentence longer than the budget gets a batch of its own") {
  std::vector<int32_t> src = {50, 2, 2}, tgt = {50, 2, 2};
  auto t = filter_by_length(src, tgt, 100);
  auto plan = plan_epoch(t, 20, 1, 1);
  REQUIRE(plan.size() == 2);
  for (const auto& b : plan)
    if (std::find(b.begin(), b.end(), 0) != b.end()) CHECK(b.size() == 1);
}

TEST_CASE("data.pad_to_multiple: lengths rounded up, batches within the budget at their padded size, fewer shapes") {
  auto c = random_corpus(3000, 11);
  const auto exact = filter_by_length(c.src, c.tgt, 1000);
  const auto padded = padded_lengths(exact, 8);
  REQUIRE(padded.ids == exact.ids);
  for (size_t i = 0; i < exact.ids.size(); ++i) {
    CHECK(padded.src_len[i] % 8 == 0);
    CHECK(padded.src_len[i] >= exact.src_len[i]);
    CHECK(padded.src_len[i] - exact.src_len[i] < 8);
    CHECK(padded.tgt_len[i] % 8 == 0);
  }
  CHECK(padded_lengths(exact, 1).src_len == exact.src_len);
  // A batch's shape: rows and the padded widths of both sides, recomputed from the raw lengths.
  auto shapes_of = [&](const BatchPlan& plan, int64_t m, int64_t budget) {
    std::set<std::tuple<size_t, int64_t, int64_t>> shapes;
    for (const auto& b : plan) {
      int64_t ms = 0, mt = 0;
      for (int64_t id : b) {
        ms = std::max<int64_t>(ms, c.src[id] + 1);
        mt = std::max<int64_t>(mt, c.tgt[id] + 1);
      }
      ms = (ms + m - 1) / m * m;
      mt = (mt + m - 1) / m * m;
      CHECK(static_cast<int64_t>(b.size()) * (ms + mt) <= budget);
      shapes.insert({b.size(), ms, mt});
    }
    return shapes.size();
  };
  const size_t before = shapes_of(plan_epoch(exact, 2048, 1, 1), 1, 2048);
  const size_t after = shapes_of(plan_epoch(padded, 2048, 1, 1), 8, 2048);
  INFO(before << " shapes -> " << after);
  CHECK(after * 2 < before);
}

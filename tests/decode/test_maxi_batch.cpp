#include <algorithm>
#include <random>
#include <set>

#include <catch2/catch.hpp>

#include "decode/maxi_batch.h"

using namespace parla::decode;

namespace {
std::vector<size_t> random_lengths(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<size_t> l(n);
  for (auto& x : l) x = rng() % 60;
  return l;
}
}  // namespace

TEST_CASE("every sentence of a window lands in exactly one batch", "[maxi_batch]") {
  for (unsigned seed = 0; seed < 20; ++seed) {
    auto lengths = random_lengths(1 + seed * 13, seed);
    for (BatchLimits lim : {BatchLimits{1, 0, 5}, BatchLimits{16, 0, 5}, BatchLimits{64, 300, 5}}) {
      auto batches = plan_batches(lengths, lim);
      std::vector<int> seen(lengths.size(), 0);
      for (auto& b : batches) {
        REQUIRE(!b.empty());
        for (size_t i : b) seen.at(i)++;
      }
      CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
    }
  }
}

TEST_CASE("batches hold sentences sorted by length, longest first", "[maxi_batch]") {
  auto lengths = random_lengths(200, 3);
  auto batches = plan_batches(lengths, BatchLimits{16, 0, 20});
  std::vector<size_t> flat;
  for (auto& b : batches) flat.insert(flat.end(), b.begin(), b.end());
  for (size_t i = 1; i < flat.size(); ++i) {
    CHECK(lengths[flat[i - 1]] >= lengths[flat[i]]);
    if (lengths[flat[i - 1]] == lengths[flat[i]]) CHECK(flat[i - 1] < flat[i]);  // ties keep input order
  }
  for (size_t b = 0; b + 1 < batches.size(); ++b) CHECK(batches[b].size() == 16);
}

TEST_CASE("a token budget bounds the padded size of every batch", "[maxi_batch]") {
  auto lengths = random_lengths(300, 5);
  lengths.push_back(500);  // alone over the budget: its own batch
  const size_t budget = 256;
  auto batches = plan_batches(lengths, BatchLimits{1000, budget, 10});
  for (auto& b : batches) {
    size_t width = 0;
    for (size_t i : b) width = std::max(width, lengths[i] + 1);
    if (b.size() > 1) CHECK(width * b.size() <= budget);
  }
  // Greedy filling: a batch is closed only when the next sentence would not fit.
  for (size_t k = 0; k + 1 < batches.size(); ++k) {
    size_t width = 0;
    for (size_t i : batches[k]) width = std::max(width, lengths[i] + 1);
    CHECK(width * (batches[k].size() + 1) > budget);
  }
}

TEST_CASE("an empty window has no batches and the window size follows the limits", "[maxi_batch]") {
  CHECK(plan_batches({}, BatchLimits{}).empty());
  CHECK(window_sentences(BatchLimits{16, 0, 10}) == 160);
  CHECK(window_sentences(BatchLimits{1, 0, 1}) == 1);
  CHECK(window_sentences(BatchLimits{16, 800, 10}) == 1000);
}

TEST_CASE("batching by sentences caps a batch of long sources at batch_size x 128 padded tokens", "[maxi_batch]") {
  CHECK(batch_token_budget(BatchLimits{32, 0, 20}) == 32 * kSentenceBatchTokensPerSentence);
  CHECK(batch_token_budget(BatchLimits{32, 800, 20}) == 800);
  // A window of sources cut at 1023 pieces (random bytes): 4 of them fill 4 x 1024 = 4096 tokens, not 32.
  const std::vector<size_t> garbage(70, 1023);
  auto batches = plan_batches(garbage, BatchLimits{32, 0, 20});
  REQUIRE(batches.size() == 18);
  for (size_t b = 0; b + 1 < batches.size(); ++b) CHECK(batches[b].size() == 4);
  // Real sentences (up to 127 pieces) still make batches of batch_size.
  const std::vector<size_t> text(70, 127);
  auto full = plan_batches(text, BatchLimits{32, 0, 20});
  REQUIRE(full.size() == 3);
  CHECK(full[0].size() == 32);
  CHECK(full[1].size() == 32);
  CHECK(full[2].size() == 6);
}

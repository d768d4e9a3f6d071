#include "data/held_out_split.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace parla::data {

uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  // Reject the top partial block of the 2^64 range so that every residue is equally likely.
  uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
  uint64_t x;
  do {
    x = rng();
  } while (x >= limit);
  return x % n;
}

SelectionSampler::SelectionSampler(uint64_t n, uint64_t k, uint64_t seed)
    : rng_(seed), remaining_(n), needed_(std::min(k, n)) {}

bool SelectionSampler::next() {
  if (remaining_ == 0) return false;
  // Select the current item with probability needed / remaining (Algorithm S).
  bool take = needed_ > 0 && uniform_below(rng_, remaining_) < needed_;
  --remaining_;
  if (take) --needed_;
  return take;
}

std::vector<Split> assign_splits(uint64_t n, uint64_t valid, uint64_t test, uint64_t seed) {
  std::vector<Split> out(n, Split::kTrain);
  uint64_t held = std::min(n, valid + test);
  // Two independent streams of the seed: which pairs are held out, then which of those are test.
  SelectionSampler pick(n, held, seed);
  SelectionSampler pick_test(held, std::min(test, held), seed ^ 0x9E3779B97F4A7C15ULL);
  for (uint64_t i = 0; i < n; ++i)
    if (pick.next()) out[i] = pick_test.next() ? Split::kTest : Split::kValid;
  return out;
}

std::vector<Split> assign_last_splits(uint64_t n, uint64_t valid, uint64_t test) {
  std::vector<Split> out(n, Split::kTrain);
  uint64_t t = std::min(n, test), v = std::min(n - t, valid);
  for (uint64_t i = n - t - v; i < n - t; ++i) out[i] = Split::kValid;
  for (uint64_t i = n - t; i < n; ++i) out[i] = Split::kTest;
  return out;
}

DocumentSplit::DocumentSplit(std::vector<std::string> valid_prefixes, std::vector<std::string> test_prefixes) {
  for (const auto* list : {&valid_prefixes, &test_prefixes})
    for (const auto& p : *list)
      if (p.empty()) throw ConfigError("data.valid_documents and data.test_documents must not hold an empty prefix");
  for (const auto& v : valid_prefixes)
    for (const auto& t : test_prefixes)
      if (v.rfind(t, 0) == 0 || t.rfind(v, 0) == 0)
        throw ConfigError("data.valid_documents '" + v + "' and data.test_documents '" + t +
                          "' overlap: a document would be in both held-out sets");
  prefixes_[static_cast<int>(Split::kValid)] = std::move(valid_prefixes);
  prefixes_[static_cast<int>(Split::kTest)] = std::move(test_prefixes);
  for (int k = 0; k < 3; ++k) matches_[k].assign(prefixes_[k].size(), 0);
}

Split DocumentSplit::of(std::string_view docid) {
  for (Split s : {Split::kTest, Split::kValid}) {
    int k = static_cast<int>(s);
    for (size_t i = 0; i < prefixes_[k].size(); ++i)
      if (docid.substr(0, prefixes_[k][i].size()) == prefixes_[k][i]) {
        ++matches_[k][i];
        return s;
      }
  }
  return Split::kTrain;
}

std::vector<std::string> DocumentSplit::unmatched() const {
  std::vector<std::string> out;
  for (int k = 0; k < 3; ++k)
    for (size_t i = 0; i < prefixes_[k].size(); ++i)
      if (matches_[k][i] == 0) out.push_back(prefixes_[k][i]);
  return out;
}

}  // namespace parla::data

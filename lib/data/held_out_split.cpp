#include "data/held_out_split.h"

#include <algorithm>
#include <limits>

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

}  // namespace parla::data

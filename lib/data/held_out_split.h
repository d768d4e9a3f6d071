#pragma once
// Deterministic, seeded sampling for the validation/test split and the SentencePiece sample. Sequential
// selection sampling (Knuth, TAOCP vol. 2, 3.4.2, Algorithm S) picks exactly k of n items in one streaming
// pass with O(1) memory, each k-subset equally likely; the random numbers come from std::mt19937_64, whose
// output the C++ standard fixes, through our own unbiased bounded draw (std::uniform_int_distribution is
// implementation-defined), so the same seed gives the same split everywhere.
#include <cstdint>
#include <random>
#include <vector>

namespace parla::data {

// Uniform integer in [0, n), n > 0 (rejection sampling: no modulo bias).
uint64_t uniform_below(std::mt19937_64& rng, uint64_t n);

// Streams over n items and says for each, in order, whether it is selected; exactly min(k, n) are.
class SelectionSampler {
 public:
  SelectionSampler(uint64_t n, uint64_t k, uint64_t seed);
  bool next();  // call exactly n times

 private:
  std::mt19937_64 rng_;
  uint64_t remaining_, needed_;
};

enum class Split : uint8_t { kTrain = 0, kValid = 1, kTest = 2 };

// Assigns each of n pairs to train, valid or test: exactly `valid` and `test` pairs are held out.
std::vector<Split> assign_splits(uint64_t n, uint64_t valid, uint64_t test, uint64_t seed);

}  // namespace parla::data

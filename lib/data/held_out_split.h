#pragma once
// Deterministic, seeded sampling for the validation/test split and the SentencePiece sample. Sequential
// selection sampling (Knuth, TAOCP vol. 2, 3.4.2, Algorithm S) picks exactly k of n items in one streaming
// pass with O(1) memory, each k-subset equally likely; the random numbers come from std::mt19937_64, whose
// output the C++ standard fixes, through our own unbiased bounded draw (std::uniform_int_distribution is
// implementation-defined), so the same seed gives the same split everywhere.
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
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

// The last `test` pairs are test and the `valid` before them valid (data.held_out = last): a corpus in document
// order keeps its held-out text away from its training text's neighbours, which random lines would not (Europarl
// repeats itself across neighbouring lines and days).
std::vector<Split> assign_last_splits(uint64_t n, uint64_t valid, uint64_t test);

// Held-out sets by document (data.held_out = documents): a pair whose document id (Europarl's `ep-YY-MM-DD` day)
// starts with one of the test prefixes is test, with one of the valid prefixes valid; "ep-01-09" holds out a month.
class DocumentSplit {
 public:
  // Throws ConfigError when a valid prefix and a test prefix overlap (one starts the other) or one is empty.
  DocumentSplit(std::vector<std::string> valid_prefixes, std::vector<std::string> test_prefixes);
  Split of(std::string_view docid);
  // The prefixes that no document id has matched so far.
  std::vector<std::string> unmatched() const;

 private:
  std::vector<std::string> prefixes_[3];
  std::vector<uint64_t> matches_[3];
};

}  // namespace parla::data

#pragma once
// One finished translation hypothesis (Marian's translator/hypothesis.h, flattened: search keeps back-pointers
// implicit by copying prefixes, which costs little next to a decoder step). Torch-free.
#include <cstdint>
#include <vector>

namespace parla::decode {

struct Hypothesis {
  std::vector<int64_t> tokens;  // target ids, without BOS and EOS
  float log_prob = 0;           // log P(Y|X) including EOS (for an ensemble: the mean of the members')
  float score = 0;              // log_prob / GNMT length penalty: what hypotheses are ranked by
                                // (both NaN from a greedy search asked for no scores: SearchOptions::scores)
  // Cross-attention per target token, EOS included: attention[t][s] for source positions s (source EOS last).
  // Empty unless the search was asked for attention.
  std::vector<std::vector<float>> attention;
};

// The n best hypotheses of one sentence, best first.
using NBestList = std::vector<Hypothesis>;

}  // namespace parla::decode

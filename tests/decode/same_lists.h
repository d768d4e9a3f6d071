#pragma once
// Two n-best lists that must be the same to the bit: tokens, scores, log-probabilities and, unless
// `compare_alignments` is false (one search asked for them, the other not), alignments. Catch2 checks, so every
// difference is reported.
#include <cstring>

#include <catch2/catch.hpp>

#include "decode/hypothesis.h"

namespace parla::decode::testing {

inline void same_lists(const NBestList& got, const NBestList& want, bool compare_alignments = true) {
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    CHECK(got[k].tokens == want[k].tokens);
    CHECK(std::memcmp(&got[k].score, &want[k].score, sizeof(float)) == 0);
    CHECK(std::memcmp(&got[k].log_prob, &want[k].log_prob, sizeof(float)) == 0);
    if (compare_alignments) CHECK(got[k].attention == want[k].attention);
  }
}

}  // namespace parla::decode::testing

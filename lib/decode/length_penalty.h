#pragma once
// GNMT length penalty (Wu et al. 2016, "Google's Neural Machine Translation System", eq. 14):
//   lp(Y) = ((5 + |Y|) / (5 + 1))^alpha,   s(Y, X) = log P(Y|X) / lp(Y)
// alpha = 0 ranks by log-probability; larger alpha favours longer outputs. |Y| counts EOS.
#include <cstdint>

namespace parla::decode {

double length_penalty(int64_t length, double alpha);

// The normalised score of a hypothesis with total log-probability `log_prob` and `length` tokens.
float normalized_score(float log_prob, int64_t length, double alpha);

}  // namespace parla::decode

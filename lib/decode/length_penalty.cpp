#include "decode/length_penalty.h"

#include <cmath>

namespace parla::decode {

double length_penalty(int64_t length, double alpha) {
  if (alpha == 0) return 1.0;
  return std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

float normalized_score(float log_prob, int64_t length, double alpha) {
  return static_cast<float>(static_cast<double>(log_prob) / length_penalty(length, alpha));
}

}  // namespace parla::decode

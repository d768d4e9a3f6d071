#pragma once
// e^x for x <= 0 (a score minus its row's maximum, in a softmax) without a library call, so that the loops calling it
// vectorise: x = n ln2 + r with |r| <= ln2/2, e^r by its Taylor polynomial to degree 7 (truncation error < 6e-9;
// the result is within a few float ulps of e^x), 2^n from the exponent bits. Every value is computed on its own, so
// it does not depend on where in a vector it sits. Inputs below -87 give e^-87 (~1.6e-38) instead of less: a zero
// weight either way after normalisation. Used by single-query attention and the shortlist's softmax. Torch-free.
#include <cstdint>
#include <cstring>

namespace parla::kernels {

inline __attribute__((always_inline)) float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest (1.5 * 2^23)
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;             // ln 2 in two parts (Cody-Waite)
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  const float y = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

}  // namespace parla::kernels

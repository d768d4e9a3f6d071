#include "kernels/log_softmax.h"

#include <cmath>
#include <limits>

#include "kernels/exp_nonpositive.h"

namespace parla::kernels {
namespace {

constexpr int kLanes = 16;

// The largest logit; a NaN never enters a lane (the comparisons are false), the sum below turns it into NaN.
__attribute__((target_clones("avx512f", "avx2", "default")))
float row_max(const float* x, int64_t n) {
  const float ninf = -std::numeric_limits<float>::infinity();
  float lane[kLanes];
  for (float& l : lane) l = ninf;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] = lane[j] < x[i + j] ? x[i + j] : lane[j];
  for (int j = 0; i + j < n; ++j) lane[j] = lane[j] < x[i + j] ? x[i + j] : lane[j];
  float m = lane[0];
  for (int j = 1; j < kLanes; ++j) m = m < lane[j] ? lane[j] : m;
  return m;
}

// sum e^(x - max) in a fixed order, the exponentials never stored (one pass over the row, which is still in cache).
__attribute__((target_clones("avx512f", "avx2", "default")))
double shifted_exp_sum(const float* x, int64_t n, float max) {
  float lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] += exp_nonpositive(x[i + j] - max);
  for (int j = 0; i + j < n; ++j) lane[j] += exp_nonpositive(x[i + j] - max);
  double sum = 0;
  for (float l : lane) sum += l;
  return sum;
}

}  // namespace

__attribute__((target_clones("avx512f", "avx2", "default")))
void subtract(const float* x, int64_t n, float c, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] - c;
}

float log_sum_exp(const float* x, int64_t n) {
  if (n <= 0) return -std::numeric_limits<float>::infinity();
  const float max = row_max(x, n);
  // x - (-inf) is NaN only for x = -inf: every logit -inf gives NaN, as it should (nothing to normalise).
  if (max == -std::numeric_limits<float>::infinity()) return std::numeric_limits<float>::quiet_NaN();
  return max + static_cast<float>(std::log(shifted_exp_sum(x, n, max)));
}

void log_softmax(const float* x, int64_t n, float* out) { subtract(x, n, log_sum_exp(x, n), out); }

}  // namespace parla::kernels

// The log-softmax kernel against the definition computed naively in double precision (every exponential by
// std::exp, one sum in order), and its special rows against what LibTorch's log_softmax gives for them (NaN rows).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/log_softmax.h"

namespace {

using parla::kernels::log_softmax;
using parla::kernels::log_sum_exp;

double naive_lse(const std::vector<float>& x) {
  double max = -std::numeric_limits<double>::infinity();
  for (float v : x) max = std::max(max, static_cast<double>(v));
  double sum = 0;
  for (float v : x) sum += std::exp(static_cast<double>(v) - max);
  return max + std::log(sum);
}

std::vector<float> random_row(std::mt19937& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = u(rng);
  return x;
}

}  // namespace

TEST_CASE("log_softmax equals the naive double-precision definition on rows of every length") {
  std::mt19937 rng(7);
  for (int64_t n : {1, 2, 15, 16, 17, 33, 300, 8000, 58101}) {
    for (float spread : {1.0f, 20.0f, 200.0f}) {  // 200: most exponentials far below e^-87
      INFO("n " << n << " spread " << spread);
      auto x = random_row(rng, n, -spread, spread / 4);
      const double want = naive_lse(x);
      const float lse = log_sum_exp(x.data(), n);
      CHECK(std::fabs(lse - want) <= 1e-6 * std::max(1.0, std::fabs(want)) + 2e-6);
      std::vector<float> out(x.size());
      log_softmax(x.data(), n, out.data());
      double total = 0;
      for (int64_t i = 0; i < n; ++i) {
        REQUIRE(out[i] == x[i] - lse);  // one subtraction from the logit: tiny probabilities keep their digits
        total += std::exp(static_cast<double>(out[i]));
      }
      CHECK(std::fabs(total - 1.0) < 2e-5);
    }
  }
}

TEST_CASE("log_softmax gives a row the same bits wherever it sits in memory, and may write over its input") {
  std::mt19937 rng(8);
  const int64_t n = 1001;
  auto x = random_row(rng, n, -10, 5);
  std::vector<float> alone(x.size());
  log_softmax(x.data(), n, alone.data());
  for (int offset : {1, 3, 7, 16}) {  // unaligned starts: the vector loops and their tails split the row differently
    std::vector<float> buffer(static_cast<size_t>(n + offset), 0.0f);
    std::memcpy(buffer.data() + offset, x.data(), sizeof(float) * n);
    log_softmax(buffer.data() + offset, n, buffer.data() + offset);
    CHECK(std::memcmp(buffer.data() + offset, alone.data(), sizeof(float) * n) == 0);
  }
}

TEST_CASE("log_softmax of special rows: -inf entries stay -inf, NaN or +inf or no finite logit give NaN") {
  const float ninf = -std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(9);
  auto x = random_row(rng, 40, -3, 3);
  x[5] = x[39] = ninf;  // forbidden tokens: probability zero, the others still sum to one
  std::vector<float> out(x.size());
  log_softmax(x.data(), 40, out.data());
  CHECK(out[5] == ninf);
  CHECK(out[39] == ninf);
  double total = 0;
  for (float v : out) total += std::exp(static_cast<double>(v));
  CHECK(std::fabs(total - 1.0) < 1e-6);

  for (float bad : {nan, std::numeric_limits<float>::infinity()}) {
    auto y = x;
    y[17] = bad;
    CHECK(std::isnan(log_sum_exp(y.data(), 40)));
    log_softmax(y.data(), 40, out.data());
    for (float v : out) CHECK(std::isnan(v));
  }
  std::vector<float> none(20, ninf);
  CHECK(std::isnan(log_sum_exp(none.data(), 20)));
  CHECK(log_sum_exp(none.data(), 0) == ninf);
}

#include <catch2/catch.hpp>

#include <cmath>

#include "core/error.h"
#include "train/lr_schedule.h"

using parla::train::LrSchedule;

TEST_CASE("inverse-sqrt schedule warms up linearly then decays as the paper's formula") {
  // Vaswani et al. eq. 3: d^-0.5 * min(step^-0.5, step * warmup^-1.5); with peak lr the factor d^-0.5 becomes
  // lr * sqrt(warmup).
  const double lr = 7e-4;
  const int64_t warmup = 4000;
  LrSchedule s(parla::LrScheduleKind::kInverseSqrt, lr, warmup);
  for (int64_t step : {1, 100, 3999, 4000, 4001, 10000, 100000}) {
    double paper = lr * std::sqrt(static_cast<double>(warmup)) *
                   std::min(std::pow(step, -0.5), step * std::pow(static_cast<double>(warmup), -1.5));
    CHECK(s(step) == Approx(paper).epsilon(1e-12));
  }
  CHECK(s(warmup) == Approx(lr));
}

TEST_CASE("constant schedule holds the peak after warm-up") {
  LrSchedule s(parla::LrScheduleKind::kConstant, 0.01, 10);
  CHECK(s(5) == Approx(0.005));
  CHECK(s(10) == Approx(0.01));
  CHECK(s(12345) == Approx(0.01));
  LrSchedule nowarm(parla::LrScheduleKind::kConstant, 0.01, 0);
  CHECK(nowarm(1) == Approx(0.01));
}

TEST_CASE("cosine schedule goes from the peak to min_lr at max_steps") {
  LrSchedule s(parla::LrScheduleKind::kCosine, 1.0, 10, 0.1, 110);
  CHECK(s(10) == Approx(1.0));
  CHECK(s(60) == Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.5))));
  CHECK(s(110) == Approx(0.1));
  CHECK(s(500) == Approx(0.1));
}

TEST_CASE("min_lr floors the inverse-sqrt decay") {
  LrSchedule s(parla::LrScheduleKind::kInverseSqrt, 1.0, 1, 0.5);
  CHECK(s(100) == Approx(0.5));
}

TEST_CASE("cosine without max_steps is a config error") {
  CHECK_THROWS_AS(LrSchedule(parla::LrScheduleKind::kCosine, 1.0, 10, 0.0, 0), parla::ConfigError);
}

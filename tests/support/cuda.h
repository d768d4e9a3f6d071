#pragma once
// Tests that need a GPU (tagged [cuda]) start with PARLA_REQUIRE_CUDA(): without a visible CUDA device the test
// prints the marker line below and returns, and ctest reports it as skipped (SKIP_REGULAR_EXPRESSION) rather
// than passed, so a CPU-only run never claims GPU coverage.
#include <cstdio>

#include <torch/cuda.h>

namespace parla::testing {

inline constexpr const char* kNeedsCudaMarker = "PARLA-SKIP: needs a CUDA device";

// True when a CUDA device is visible; otherwise prints the skip marker and returns false.
inline bool cuda_or_skip() {
  if (torch::cuda::is_available()) return true;
  std::printf("%s\n", kNeedsCudaMarker);
  std::fflush(stdout);
  return false;
}

}  // namespace parla::testing

#define PARLA_REQUIRE_CUDA()                          \
  do {                                                \
    if (!::parla::testing::cuda_or_skip()) return;    \
  } while (0)

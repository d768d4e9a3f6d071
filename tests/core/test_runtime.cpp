#include <catch2/catch.hpp>

#include <thread>

#include <torch/torch.h>

#include "core/runtime.h"

TEST_CASE("runtime: threads = N sets LibTorch's intra-op pool to N, and 0 means all cores") {
  parla::RuntimeConfig rc;
  rc.threads = 1;
  CHECK(parla::runtime::apply(rc) == 1);
  CHECK(torch::get_num_threads() == 1);
  rc.threads = 0;
  int all = static_cast<int>(std::thread::hardware_concurrency());
  CHECK(parla::runtime::apply(rc) == all);
  CHECK(torch::get_num_threads() == all);
}

TEST_CASE("runtime: the BLAS that LibTorch calls is OpenBLAS (tools/setup.sh installs it, reference BLAS is 40x slower)") {
  CHECK_THAT(parla::runtime::blas_name(), Catch::Matchers::StartsWith("OpenBLAS"));
}

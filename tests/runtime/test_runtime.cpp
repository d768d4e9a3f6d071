#include <catch2/catch.hpp>

#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "core/heap_allocator.h"
#include "runtime/runtime.h"
#include "runtime/torch_compat.h"
#include "support/heap_allocator_expected.h"
#include "support/run.h"

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

TEST_CASE("runtime: with inter_threads workers, threads = 0 gives each worker its share of the cores (at least 1)") {
  parla::RuntimeConfig rc;
  const int all = static_cast<int>(std::thread::hardware_concurrency());
  rc.threads = 0;
  rc.inter_threads = 2;
  CHECK(parla::runtime::apply(rc) == std::max(1, all / 2));
  rc.inter_threads = 4 * all;  // more workers than cores: one thread each, never zero
  CHECK(parla::runtime::apply(rc) == 1);
  rc.threads = 3;  // given explicitly: per worker, whatever the worker count
  CHECK(parla::runtime::apply(rc) == 3);
  // A worker thread starts with OpenMP's default; init_worker_thread gives it the count asked for.
  int seen = 0;
  std::thread([&] {
    parla::runtime::init_worker_thread(1);
    seen = torch::get_num_threads();
  }).join();
  CHECK(seen == 1);
  rc = parla::RuntimeConfig{};
  parla::runtime::apply(rc);
}

TEST_CASE("runtime: the BLAS that LibTorch calls is a fast one, never the 40x slower reference BLAS") {
  // Debian's LibTorch calls the system BLAS (tools/setup.sh installs OpenBLAS); the PyTorch wheel's LibTorch
  // (--libtorch2) carries MKL inside.
  const bool debian = std::string(parla::compat::torch_version()).rfind("1.", 0) == 0;
  CHECK_THAT(parla::runtime::blas_name(), Catch::Matchers::StartsWith(debian ? "OpenBLAS" : "MKL"));
}

TEST_CASE("runtime: the library's own parallel_for uses LibTorch's threads (it is compiled with OpenMP)") {
  // Compiled without OpenMP, ATen's parallel_for silently runs on the calling thread: int8 products and attention
  // would then leave every other core idle.
  parla::RuntimeConfig rc;
  rc.threads = 2;  // two threads even on one core: the count is what is checked, not the speed
  parla::runtime::apply(rc);
  CHECK(parla::runtime::parallel_width(64) == 2);
  CHECK(parla::runtime::parallel_width(1) == 1);  // one item: no second thread
  rc.threads = 1;
  parla::runtime::apply(rc);
  CHECK(parla::runtime::parallel_width(64) == 1);
  parla::runtime::apply(parla::RuntimeConfig{});
}

TEST_CASE("runtime: a SingleThreadScope keeps the calling thread's parallel regions on it, and restores the count") {
  parla::RuntimeConfig rc;
  rc.threads = 2;
  parla::runtime::apply(rc);
  REQUIRE(parla::runtime::parallel_width(64) == 2);
  {
    parla::runtime::SingleThreadScope alone(true);
    CHECK(parla::runtime::parallel_width(64) == 1);
    parla::runtime::SingleThreadScope nested(true);  // already alone: nothing to restore
    CHECK(parla::runtime::parallel_width(64) == 1);
  }
  CHECK(parla::runtime::parallel_width(64) == 2);
  {
    parla::runtime::SingleThreadScope not_alone(false);
    CHECK(parla::runtime::parallel_width(64) == 2);
  }
  CHECK(parla::runtime::parallel_width(64) == 2);
  parla::runtime::apply(parla::RuntimeConfig{});
}

namespace {

// Every "GOMP_SPINCOUNT = 'N'" that libgomp printed (OMP_DISPLAY_ENV=verbose): what each OpenMP runtime in the
// process read from the environment as it started. 0 is passive waiting.
std::vector<std::string> spin_counts(const std::string& err) {
  std::vector<std::string> counts;
  const std::string key = "GOMP_SPINCOUNT = '";
  for (size_t at = err.find(key); at != std::string::npos; at = err.find(key, at + 1)) {
    const size_t begin = at + key.size();
    counts.push_back(err.substr(begin, err.find('\'', begin) - begin));
  }
  return counts;
}

}  // namespace

TEST_CASE("runtime: an executable started without the tuning variables has them before its libraries read them") {
  using parla::testing::executable;
  using parla::testing::run;
  const std::string exe = executable("parla-translate");
  auto with = [&](std::vector<std::string> vars) {
    std::vector<std::string> args{"-u", "OMP_WAIT_POLICY", "-u", "OPENBLAS_NUM_THREADS", "-u", "PARLA_NO_REEXEC",
                                  "OMP_DISPLAY_ENV=verbose"};
    args.insert(args.end(), vars.begin(), vars.end());
    args.push_back(exe);
    args.push_back("--version");
    return run("/usr/bin/env", args);
  };
  // Restarted with OMP_WAIT_POLICY=PASSIVE: libgomp waits without spinning. The user's own variable
  // (OMP_DISPLAY_ENV) and the arguments (--version) survive the restart.
  auto tuned = with({});
  REQUIRE(tuned.exit_code == 0);
  CHECK(tuned.out.find("parla-translate ") != std::string::npos);
  auto counts = spin_counts(tuned.err);
  REQUIRE_FALSE(counts.empty());
  for (const auto& c : counts) CHECK(c == "0");
  // PARLA_NO_REEXEC=1: libgomp's default (spinning before it sleeps), not passive.
  auto untuned = with({"PARLA_NO_REEXEC=1"});
  REQUIRE(untuned.exit_code == 0);
  counts = spin_counts(untuned.err);
  REQUIRE_FALSE(counts.empty());
  for (const auto& c : counts) CHECK(c != "0");
  // A user's own OMP_WAIT_POLICY is kept (no restart).
  auto active = with({"OMP_WAIT_POLICY=active"});
  REQUIRE(active.exit_code == 0);
  CHECK(active.err.find("OMP_WAIT_POLICY = 'ACTIVE'") != std::string::npos);
}

#ifdef PARLA_PLACEHOLDER_DIR
// cmake/placeholder_libraries.sh: this test executable links LibTorch as the apps do, so the loader must have taken
// each placeholder from its folder (dl_iterate_phdr names the path it opened) and never the library it stands for.
TEST_CASE("runtime: the libraries Debian's LibTorch names but never calls are empty placeholders in this process") {
  namespace fs = std::filesystem;
  std::vector<std::string> placeholders;
  for (const auto& entry : fs::directory_iterator(PARLA_PLACEHOLDER_DIR))
    placeholders.push_back(entry.path().filename().string());
  REQUIRE_FALSE(placeholders.empty());
  std::vector<std::string> loaded;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        auto* names = static_cast<std::vector<std::string>*>(out);
        if (info->dlpi_name && *info->dlpi_name) names->push_back(info->dlpi_name);
        return 0;
      },
      &loaded);
  const fs::path dir = fs::canonical(PARLA_PLACEHOLDER_DIR);
  auto in_dir = [&](const std::string& path) {  // (the vDSO has a name without a folder)
    return path.find('/') != std::string::npos && fs::canonical(fs::path(path).parent_path()) == dir;
  };
  for (const auto& name : placeholders) {
    INFO(name);
    int from_dir = 0, elsewhere = 0;
    for (const auto& path : loaded) {
      if (fs::path(path).filename() != name) continue;
      (in_dir(path) ? from_dir : elsewhere) += 1;
    }
    CHECK(from_dir == 1);
    CHECK(elsewhere == 0);
  }
  // And none of the real ones came in by another name (OpenCV's libraries name each other, FFmpeg's too).
  for (const auto& path : loaded) {
    if (in_dir(path)) continue;
    INFO(path);
    CHECK(path.find("libopencv_") == std::string::npos);
    CHECK(path.find("libavformat") == std::string::npos);
  }
}
#endif

TEST_CASE("runtime: the executables' heap allocator is the one the build chose") {
  // This binary links like every LibTorch executable (parla_link_executable, cmake/HeapAllocator.cmake): the
  // allocator it links must be the malloc everybody calls.
  CHECK(parla::heap_allocator_name() == parla::testing::expected_heap_allocator());
}

TEST_CASE("runtime::apply makes the runtime section the process's: its kernel choices are read from there") {
  const parla::RuntimeConfig before = parla::applied_runtime();
  parla::RuntimeConfig rc = before;
  rc.packed_fp32 = parla::PackedFp32::kOff;
  rc.int8_panels = false;
  rc.fused_decoder_step = false;
  rc.threads = torch::get_num_threads();
  parla::runtime::apply(rc);
  CHECK(parla::applied_runtime().packed_fp32 == parla::PackedFp32::kOff);
  CHECK_FALSE(parla::applied_runtime().int8_panels);
  CHECK_FALSE(parla::applied_runtime().fused_decoder_step);
  parla::runtime::apply(before);
  CHECK(parla::applied_runtime().packed_fp32 == before.packed_fp32);
  CHECK(parla::applied_runtime().int8_panels);
}

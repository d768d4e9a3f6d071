#include "runtime/runtime.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <thread>

#include <omp.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "core/error.h"

namespace parla::runtime {

void tune_process(int /*argc*/, char** argv) {
  const char* no = std::getenv("PARLA_NO_REEXEC");
  if ((no && std::string(no) == "1") || std::getenv("OMP_WAIT_POLICY")) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  setenv("MALLOC_MMAP_MAX_", "0", 0);
  setenv("MALLOC_TRIM_THRESHOLD_", "100000000000", 0);
  // OpenBLAS starts one thread per core when it is loaded, and they spin before they sleep: 0.17 s of CPU per
  // start on 2 cores, before main. One thread at load; apply() sizes the pool (openblas_set_num_threads grows it).
  setenv("OPENBLAS_NUM_THREADS", "1", 0);
  execv("/proc/self/exe", argv);
  // exec failed (no /proc?): carry on untuned rather than fail.
}

void init_worker_thread(int threads) {
  // LibTorch's count is global, but OpenMP's is per thread: a new thread starts with OMP_NUM_THREADS or every
  // core, which oneDNN's int8 primitives would read before any ATen operation initialised it.
  torch::set_num_threads(std::max(1, threads));
}

SingleThreadScope::SingleThreadScope(bool alone) {
  if (!alone) return;
  const int threads = omp_get_max_threads();
  if (threads <= 1) return;
  restore_ = threads;
  omp_set_num_threads(1);
}

SingleThreadScope::~SingleThreadScope() {
  if (restore_ > 0) omp_set_num_threads(restore_);
}

int parallel_width(int items) {
  std::atomic<uint64_t> seen{0};
  at::parallel_for(0, items, 1, [&](int64_t, int64_t) {
    seen.fetch_or(uint64_t{1} << std::min<int>(at::get_thread_num(), 63));
  });
  return __builtin_popcountll(seen.load());
}

std::string blas_name() {
  using ConfigFn = char* (*)();
  if (auto fn = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config")))
    return std::string("OpenBLAS (") + fn() + ")";
  if (dlsym(RTLD_DEFAULT, "mkl_get_max_threads")) return "MKL";
  if (dlsym(RTLD_DEFAULT, "bli_info_get_version_str")) return "BLIS";
  return "reference BLAS";
}

int apply(const RuntimeConfig& rc) {
  int threads = rc.threads > 0 ? rc.threads
                               : static_cast<int>(std::thread::hardware_concurrency()) / std::max(1, rc.inter_threads);
  if (threads <= 0) threads = 1;
  torch::set_num_threads(threads);
  using SetThreadsFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetThreadsFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(threads);
  std::string blas = blas_name();
  if (blas == "reference BLAS") {
    spdlog::warn("*** SLOW BLAS: this process uses the reference BLAS, about 40x slower than OpenBLAS. "
                 "Install it: sudo apt-get install libopenblas0-pthread ***");
  }
  // parallel_width runs a parallel region (it wakes the pool): only when the line is printed.
  if (spdlog::should_log(spdlog::level::debug))
    spdlog::debug("runtime: {} threads (parallel_for over {}), BLAS: {}", threads, parallel_width(threads), blas);
  // runtime.device is resolved by runtime::resolve_device (runtime/runtime_device.h), the one place that decides.
  return threads;
}

}  // namespace parla::runtime

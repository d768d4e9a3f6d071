#include "runtime/runtime.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <omp.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "core/error.h"
#include "core/heap_allocator.h"

namespace parla::runtime {

namespace {

// The variables a computing process needs, read by libgomp (OMP_WAIT_POLICY), OpenBLAS (OPENBLAS_NUM_THREADS) and
// glibc's allocator (MALLOC_*) only as the process starts. OpenBLAS starts one thread per core when it is loaded,
// and they spin before they sleep (0.17 s of CPU per start on 2 cores): one thread at load, apply() sizes the pool.
// glibc: no mmap per large activation (a page fault per page of every one), no trimming of the heap top.
// tcmalloc (cmake/HeapAllocator.cmake): no "large alloc" report on stderr for every block of 1 GiB or more.
constexpr const char* kTuning[] = {"OMP_WAIT_POLICY=PASSIVE", "MALLOC_MMAP_MAX_=0",
                                   "MALLOC_TRIM_THRESHOLD_=100000000000", "OPENBLAS_NUM_THREADS=1",
                                   "TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD=1099511627776"};

bool starts_with(const char* s, const char* prefix) { return std::strncmp(s, prefix, std::strlen(prefix)) == 0; }

const char* find(char** env, const char* name_eq) {
  for (; env && *env; ++env)
    if (starts_with(*env, name_eq)) return *env + std::strlen(name_eq);
  return nullptr;
}

// The executable's DT_PREINIT_ARRAY entry (ELF gABI): called once the libraries are loaded, before any of their
// constructors (libgomp and OpenBLAS read their variables there, LibTorch registers its operators) and before
// libc's own, so nothing here may rely on libc's environment (getenv, setenv: libc resets it from the original array
// right after). Where OMP_WAIT_POLICY is unset, the program starts again at once with the variables above added to
// its environment (a user's own settings kept). Restarting from main instead, as before, also paid every library's
// constructor twice: Debian LibTorch's ~290 libraries, `parla-translate --version` 1.03 s -> 0.77 s (0.51 s with the
// variables already set).
void restart_tuned(int /*argc*/, char** argv, char** env) {
  const char* no = find(env, "PARLA_NO_REEXEC=");
  if ((no && std::strcmp(no, "1") == 0) || find(env, "OMP_WAIT_POLICY=")) return;
  size_t n = 0;
  while (env && env[n]) ++n;
  constexpr size_t kAdded = sizeof(kTuning) / sizeof(kTuning[0]);
  char** next = static_cast<char**>(__builtin_alloca((n + kAdded + 1) * sizeof(char*)));
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) next[m++] = env[i];
  for (const char* v : kTuning) {
    std::string name(v, std::strchr(v, '=') + 1);
    if (!find(env, name.c_str())) next[m++] = const_cast<char*>(v);
  }
  next[m] = nullptr;
  execve("/proc/self/exe", argv, next);
  // exec failed (no /proc?): carry on untuned rather than fail.
}

__attribute__((section(".preinit_array"), used)) void (*const preinit_entry)(int, char**, char**) = restart_tuned;

}  // namespace

void tune_process(int /*argc*/, char** /*argv*/) {
  // restart_tuned did the work before the libraries' constructors; a call from main keeps this file, and so its
  // preinit entry, in every executable linking the static library.
  (void)preinit_entry;
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
  set_applied_runtime(rc);
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
    spdlog::debug("runtime: {} threads (parallel_for over {}), BLAS: {}, heap: {}", threads, parallel_width(threads),
                  blas, heap_allocator_name());
  // runtime.device is resolved by runtime::resolve_device (runtime/runtime_device.h), the one place that decides.
  return threads;
}

}  // namespace parla::runtime

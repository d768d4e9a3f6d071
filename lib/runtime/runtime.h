#pragma once
// Process-level performance settings (PLATFORM.md): thread pools and the BLAS. The header is torch-free so
// apps that do not compute with torch (parla-score-bleu) need not pull it in.
#include <string>

#include "core/config/runtime_config.h"

namespace parla::runtime {

// Call first thing in main of programs that compute with LibTorch. LibTorch's OpenMP threads spin-wait after parallel
// regions and fight OpenBLAS's threads for the cores, and glibc maps and unmaps every large activation; both cost
// training dearly (docs/BENCHMARKS.md, "Figures behind the code's choices"). The variables that fix this are read only
// as the process starts, so where they are unset the program restarts once with them set (OMP_WAIT_POLICY=PASSIVE,
// MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_, and OPENBLAS_NUM_THREADS=1 so that OpenBLAS's pool does not spin at
// start-up: apply() gives it runtime.threads). The restart happens from the executable's preinit array, before any
// library's constructor has run; calling this function is what links it in. PARLA_NO_REEXEC=1 disables it.
void tune_process(int argc, char** argv);

// Applies runtime.threads (0 = all cores, divided among runtime.inter_threads workers) to LibTorch's intra-op pool
// and the BLAS pool, and warns loudly when the BLAS is the slow reference implementation. Returns the thread
// count used (per worker).
int apply(const RuntimeConfig& rc);

// First thing in a worker thread that computes (parla-translate's inter_threads): its intra-op thread count.
void init_worker_thread(int threads);

// While alive (and `alone`), the calling thread's parallel regions (ATen's parallel_for, parla's kernels, oneDNN's
// products) run on the calling thread only; the previous count is restored after. For work too small to pay for waking
// LibTorch's other threads, which wait passively (OMP_WAIT_POLICY=PASSIVE, tune_process): a decoder step of a few rows
// made a dozen such wake-ups, and two threads were slower than one (docs/BENCHMARKS.md, "Figures behind the code's
// choices").
class SingleThreadScope {
 public:
  explicit SingleThreadScope(bool alone);
  ~SingleThreadScope();
  SingleThreadScope(const SingleThreadScope&) = delete;
  SingleThreadScope& operator=(const SingleThreadScope&) = delete;

 private:
  int restore_ = 0;  // 0: nothing to restore
};

// How many threads an at::parallel_for written in this library spreads `items` independent items over (grain 1).
// With LibTorch's pool at N threads it is min(N, items), unless the library was compiled without OpenMP, where
// ATen's header runs every parallel_for on the calling thread alone (lib/CMakeLists.txt).
int parallel_width(int items);

// "OpenBLAS ...", "reference BLAS", ...: which BLAS this process calls.
std::string blas_name();

}  // namespace parla::runtime

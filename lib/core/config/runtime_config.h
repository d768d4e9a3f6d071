#pragma once
// Section "runtime": where and how fast the work runs. Shared by every executable.
#include <string>

#include "core/config/schema.h"

namespace parla {

struct RuntimeConfig {
  int threads = 0;             // intra-op threads for LibTorch and the BLAS; 0 = all cores (/ inter_threads)
  int inter_threads = 1;       // batches translated at once by parla-translate, each on its own worker
  std::string device = "cpu";  // cpu, cuda, cuda:N or auto (runtime/runtime_device.h resolves it)
  int64_t seed = 1;            // seeds every random choice: splits, shuffling, initialisation, dropout, sampling

  static const config::SectionSchema<RuntimeConfig>& schema();
};

}  // namespace parla

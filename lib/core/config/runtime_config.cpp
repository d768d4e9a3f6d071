#include "core/config/runtime_config.h"

namespace parla {

const config::SectionSchema<RuntimeConfig>& RuntimeConfig::schema() {
  using namespace config;
  static const SectionSchema<RuntimeConfig> s = [] {
    SectionSchema<RuntimeConfig> s("runtime", "Where and how fast the work runs; read by every executable.");
    s.add("threads", &RuntimeConfig::threads,
          "Intra-op threads for LibTorch and the BLAS (they share the cores, never oversubscribe). 0 = all cores.",
          between(0, 4096));
    s.add("device", &RuntimeConfig::device, "Compute device. `auto` picks CUDA when LibTorch was built with it.",
          one_of({"cpu", "cuda", "auto"}));
    s.add("seed", &RuntimeConfig::seed,
          "Seed for every random choice (data split, shuffling, initialisation, dropout, sampling). "
          "The same config and seed give the same result on the same machine and thread count.",
          at_least(0));
    return s;
  }();
  return s;
}

}  // namespace parla

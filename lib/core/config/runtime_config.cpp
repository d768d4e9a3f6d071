#include "core/config/runtime_config.h"

#include <regex>

#include "core/error.h"

namespace parla {

const config::SectionSchema<RuntimeConfig>& RuntimeConfig::schema() {
  using namespace config;
  static const SectionSchema<RuntimeConfig> s = [] {
    SectionSchema<RuntimeConfig> s("runtime", "Where and how fast the work runs; read by every executable.");
    s.add("threads", &RuntimeConfig::threads,
          "Intra-op threads for LibTorch and the BLAS (they share the cores, never oversubscribe). 0 = all cores.",
          between(0, 4096)).flag("--threads,--cpu-threads");
    s.add("inter_threads", &RuntimeConfig::inter_threads,
          "Batches parla-translate translates at once, each on its own worker thread with runtime.threads "
          "intra-op threads (CTranslate2's inter_threads): throughput on several cores, where one batch cannot "
          "keep them busy. The output is the same as with 1. With runtime.threads 0 each worker takes all cores / "
          "inter_threads. Not with sampling; training and parla-serve do not read it.",
          between(1, 256)).flag("--inter-threads");
    s.add("device", &RuntimeConfig::device,
          "Compute device: cpu, cuda (in a data-parallel run each process takes cuda:LOCAL_RANK), cuda:N (one "
          "process on GPU N) or auto (cuda when this LibTorch sees a GPU, else cpu).").flag("--device");
    s.add("seed", &RuntimeConfig::seed,
          "Seed for every random choice (data split, shuffling, initialisation, dropout, sampling). "
          "The same config and seed give the same result on the same machine and thread count.",
          at_least(0)).flag("--seed");
    s.add("packed_fp32", &RuntimeConfig::packed_fp32,
          "Decoding's fp32 products on parla's packed kernels instead of LibTorch's BLAS: `auto` where they were "
          "measured faster (AVX-512, at most 2 threads per search; docs/BENCHMARKS.md, \"Packed fp32 products\"), "
          "`on` wherever the CPU has AVX2 or AVX-512, `off` never. The same translations either way.");
    s.add("int8_panels", &RuntimeConfig::int8_panels,
          "int8 products of a few rows (a decoder step) on parla's VNNI kernel over oneDNN's packed weights; false "
          "leaves every product to oneDNN, to compare. The same translations either way.");
    s.add("fused_decoder_step", &RuntimeConfig::fused_decoder_step,
          "The Transformer decoder's step on its fused path (models/fused_decoder_step.h); false runs its modules "
          "one by one, to compare. The same translations either way.");
    s.on_finalize([](RuntimeConfig& r, const std::set<std::string>&) {
      static const std::regex pattern("cpu|auto|cuda(:[0-9]{1,4})?");
      if (!std::regex_match(r.device, pattern))
        throw ConfigError("key 'runtime.device': '" + r.device + "' is not a device (use cpu, cuda, cuda:N or auto)");
    });
    return s;
  }();
  return s;
}

namespace {
RuntimeConfig& applied() {
  static RuntimeConfig rc;
  return rc;
}
}  // namespace

const RuntimeConfig& applied_runtime() { return applied(); }
void set_applied_runtime(const RuntimeConfig& rc) { applied() = rc; }

}  // namespace parla

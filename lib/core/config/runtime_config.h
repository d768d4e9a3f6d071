#pragma once
// Section "runtime": where and how fast the work runs. Shared by every executable.
#include <string>

#include "core/config/schema.h"

namespace parla {

// Whether decoding's fp32 products run on parla's packed kernels (nn/packed_matrix.h) instead of LibTorch's.
enum class PackedFp32 { kAuto, kOn, kOff };

struct RuntimeConfig {
  int threads = 0;             // intra-op threads for LibTorch and the BLAS; 0 = all cores (/ inter_threads)
  int inter_threads = 1;       // batches translated at once by parla-translate, each on its own worker
  std::string device = "cpu";  // cpu, cuda, cuda:N or auto (runtime/runtime_device.h resolves it)
  int64_t seed = 1;            // seeds every random choice: splits, shuffling, initialisation, dropout, sampling
  // Kernel choices, to compare paths that compute the same (A/B): read through applied_runtime() below.
  PackedFp32 packed_fp32 = PackedFp32::kAuto;  // auto: where measured faster (AVX-512, at most 2 threads)
  bool int8_panels = true;         // int8 products of a few rows on parla's VNNI kernel; false: all on oneDNN
  bool fused_decoder_step = true;  // the Transformer decoder's fused step; false: its modules one by one

  static const config::SectionSchema<RuntimeConfig>& schema();
};

// The runtime section this process applied (runtime::apply sets it, before any worker starts): the kernel choices
// are process-wide, as the thread pools are, and the layers below those that see a config (kernels/, nn/, models/)
// read them here. The struct's defaults until apply() runs.
const RuntimeConfig& applied_runtime();
void set_applied_runtime(const RuntimeConfig& rc);

}  // namespace parla

PARLA_CHOICES(parla::PackedFp32, {parla::PackedFp32::kAuto, "auto"}, {parla::PackedFp32::kOn, "on"},
              {parla::PackedFp32::kOff, "off"});

#pragma once
// Where a process computes and in which precision: the one place that turns runtime.device, training.precision
// and decoding.precision into a torch::Device and an autocast setting, and refuses what cannot run here with a
// ConfigError naming the key or flag (exit 2). Every executable, the trainer and the translator ask here; nothing
// else reads those keys.
#include <cstdint>
#include <exception>
#include <string>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "core/config/precision.h"

namespace parla::runtime {

struct DeviceRequest {
  std::string spec = "cpu";         // cpu, cuda, cuda:N or auto
  std::string key = "runtime.device";  // how errors name it: "runtime.device" or "--device"
  int world_size = 1;               // WORLD_SIZE of a data-parallel run (1 = single process)
  int local_rank = 0;               // LOCAL_RANK: a data-parallel process uses cuda:LOCAL_RANK
};

// cpu -> CPU; cuda -> cuda:LOCAL_RANK (cuda:0 in a single process); cuda:N -> that GPU (single process only);
// auto -> cuda:LOCAL_RANK when this LibTorch sees a GPU, else CPU. ConfigError when CUDA is asked for and this
// LibTorch has none or sees no device, when N (or LOCAL_RANK) is not a visible GPU, or for cuda:N with
// WORLD_SIZE > 1. Also makes the chosen GPU the current one, so kernels without an explicit device land there.
c10::Device resolve_device(const DeviceRequest& request);

// Accepts the values runtime.device may take (cpu, cuda, cuda:N, auto); used by the config schema.
bool is_device_spec(const std::string& spec);

// Number of CUDA devices this process sees (0 for a CPU-only LibTorch).
int cuda_device_count();

// data.pad_to_multiple for `device`: the configured multiple, or for 0 (auto) 8 on CUDA (few batch shapes, tensor
// core sizes) and 1 elsewhere (exact lengths, no padding arithmetic on a CPU).
int64_t resolve_pad_to_multiple(int configured, const c10::Device& device);

// fp32 -> Float, bf16 -> BFloat16, fp16 -> Half. ConfigError naming `key` for fp16 on a CPU (no fp16 autocast
// there) and for bf16 on a GPU without bf16 (compute capability < 8.0). int8 (decoding.precision only, CPU only)
// -> Float: no autocast, the quantized modules do their own arithmetic (models/int8_quantization.h).
c10::ScalarType resolve_precision(Precision precision, const c10::Device& device, const std::string& key);

// Autocast on `device`'s type for the scope when dtype is not Float (forward and loss; the backward pass follows
// the casts recorded by autograd). Restores the previous state and clears the cast cache on exit.
class AutocastScope {
 public:
  AutocastScope(const c10::Device& device, c10::ScalarType dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType type_;
  bool was_enabled_ = false;
  c10::ScalarType was_dtype_ = c10::ScalarType::Float;
};

// Whether a LibTorch error is an allocation failure: c10::OutOfMemoryError (CUDA's allocator), or the CPU
// allocator's "DefaultCPUAllocator: can't allocate" (a plain c10::Error). Training retries such a batch in halves,
// translation names the batch keys.
bool is_out_of_memory(const std::exception& e);

// "NVIDIA H100 80GB HBM3 (cuda:0)" or "CPU": for logs and benchmark reports.
std::string describe_device(const c10::Device& device);

}  // namespace parla::runtime

#include "runtime/runtime_device.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>

#include "core/error.h"
#include "runtime/torch_compat.h"

namespace parla::runtime {

namespace {

// "cuda:N" -> N; -1 for plain "cuda"; -2 when the text after "cuda:" is not a small non-negative integer.
int cuda_index(const std::string& spec) {
  if (spec == "cuda") return -1;
  const std::string head = "cuda:";
  if (spec.rfind(head, 0) != 0 || spec.size() == head.size() || spec.size() > head.size() + 4) return -2;
  int n = 0;
  for (size_t i = head.size(); i < spec.size(); ++i) {
    if (spec[i] < '0' || spec[i] > '9') return -2;
    n = n * 10 + (spec[i] - '0');
  }
  return n;
}

c10::Device use_gpu(int index) {
  c10::Device device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index));
  c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->setDevice(device);
  return device;
}

}  // namespace

int cuda_device_count() { return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0; }

bool is_device_spec(const std::string& spec) {
  return spec == "cpu" || spec == "auto" || cuda_index(spec) >= -1;
}

c10::Device resolve_device(const DeviceRequest& r) {
  const std::string& key = r.key;
  if (!is_device_spec(r.spec))
    throw ConfigError(key + " '" + r.spec + "' is not a device: use cpu, cuda, cuda:N or auto");
  if (r.spec == "cpu") return c10::Device(c10::DeviceType::CPU);
  const int gpus = cuda_device_count();
  if (r.spec == "auto") {
    if (gpus == 0) return c10::Device(c10::DeviceType::CPU);
    if (r.local_rank >= gpus)
      throw ConfigError(key + " 'auto': LOCAL_RANK " + std::to_string(r.local_rank) + " has no GPU (this machine has " +
                        std::to_string(gpus) + "); start one process per GPU");
    return use_gpu(r.local_rank);
  }
  if (gpus == 0)
    throw ConfigError(key + " '" + r.spec + "': " +
                      (torch::cuda::is_available() || PARLA_TORCH2
                           ? std::string("no CUDA device is visible to this process")
                           : std::string("this LibTorch (") + compat::torch_version() + ") was built without CUDA") +
                      "; use cpu");
  int index = cuda_index(r.spec);
  if (index >= 0 && r.world_size > 1)
    throw ConfigError(key + " '" + r.spec + "' names one GPU, but WORLD_SIZE is " + std::to_string(r.world_size) +
                      ": a data-parallel run uses cuda (each process takes cuda:LOCAL_RANK)");
  if (index < 0) index = r.local_rank;
  if (index >= gpus)
    throw ConfigError(key + " '" + r.spec + "': " +
                      (r.spec == "cuda" ? "LOCAL_RANK " + std::to_string(index) : "GPU " + std::to_string(index)) +
                      " does not exist; this machine has " + std::to_string(gpus) + " (cuda:0" +
                      (gpus > 1 ? " .. cuda:" + std::to_string(gpus - 1) : std::string()) + ")");
  return use_gpu(index);
}

c10::ScalarType resolve_precision(Precision precision, const c10::Device& device, const std::string& key) {
  switch (precision) {
    case Precision::kFp32:
      return c10::ScalarType::Float;
    case Precision::kBf16:
      if (device.is_cuda() && !compat::cuda_supports_bf16(device.index()))
        throw ConfigError(key + " 'bf16': " + device.str() +
                          " has no bfloat16 (compute capability 8.0 or newer); use fp16 or fp32");
      return c10::ScalarType::BFloat16;
    case Precision::kFp16:
      if (!device.is_cuda())
        throw ConfigError(key + " 'fp16' needs a CUDA device (" + device.str() +
                          " has no fp16 autocast); use bf16 or fp32 on a CPU");
      return c10::ScalarType::Half;
    case Precision::kInt8:
      if (key != "decoding.precision") throw ConfigError(key + " 'int8' is for decoding only; use fp32, bf16 or fp16");
      if (!device.is_cpu())
        throw ConfigError(key + " 'int8' runs on the CPU only, and runtime.device is " + device.str() +
                          "; use fp16 or bf16 on a GPU");
      return c10::ScalarType::Float;  // no autocast: the int8 products live in the quantized modules
  }
  throw ConfigError(key + " is not a precision: use fp32, bf16 or fp16");
}

AutocastScope::AutocastScope(const c10::Device& device, c10::ScalarType dtype) : type_(device.type()) {
  if (dtype == c10::ScalarType::Float) return;
  active_ = true;
  was_enabled_ = compat::autocast_enabled(type_);
  was_dtype_ = compat::autocast_dtype(type_);
  at::autocast::increment_nesting();
  compat::set_autocast(type_, true, dtype);
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  compat::set_autocast(type_, was_enabled_, was_dtype_);
  // The cast cache holds low-precision copies of the weights for the scope's duration only.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
}

bool is_out_of_memory(const std::exception& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) return true;
  const std::string m = e.what();
  return m.find("out of memory") != std::string::npos || m.find("can't allocate") != std::string::npos;
}

std::string describe_device(const c10::Device& device) {
  if (device.is_cpu()) return "CPU";
  return device.str() + " (" + std::to_string(cuda_device_count()) + " visible, LibTorch " + compat::torch_version() +
         ")";
}

int64_t resolve_pad_to_multiple(int configured, const c10::Device& device) {
  if (configured > 0) return configured;
  return device.is_cuda() ? 8 : 1;
}

}  // namespace parla::runtime

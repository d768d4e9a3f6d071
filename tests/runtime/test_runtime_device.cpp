// runtime_device: where a process computes and in which precision, and the ConfigErrors that name the key or flag.
#include <catch2/catch.hpp>

#include <stdexcept>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "core/error.h"
#include "runtime/runtime_device.h"
#include "support/cuda.h"

using parla::ConfigError;
using parla::runtime::DeviceRequest;
using parla::runtime::resolve_device;
using parla::runtime::resolve_precision;

namespace {
DeviceRequest request(const std::string& spec, const std::string& key = "--device", int world = 1, int local = 0) {
  return DeviceRequest{spec, key, world, local};
}
}  // namespace

TEST_CASE("resolve_device: cpu is the CPU, and auto is the CPU exactly when no GPU is visible") {
  CHECK(resolve_device(request("cpu")).is_cpu());
  CHECK(resolve_device(request("cpu", "runtime.device", 4, 3)).is_cpu());
  auto dev = resolve_device(request("auto"));
  if (torch::cuda::is_available()) {
    CHECK(dev == c10::Device(c10::DeviceType::CUDA, 0));
  } else {
    CHECK(dev.is_cpu());
  }
}

TEST_CASE("resolve_device: values that are no device are ConfigErrors naming the key") {
  for (std::string bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CPU", ""}) {
    INFO(bad);
    CHECK_THROWS_AS(resolve_device(request(bad, "runtime.device")), ConfigError);
    CHECK_THROWS_WITH(resolve_device(request(bad, "runtime.device")), Catch::Contains("runtime.device"));
  }
}

TEST_CASE("resolve_device: CUDA where this process sees no GPU is a ConfigError naming the flag") {
  if (torch::cuda::is_available()) return;  // the GPU cases are the [cuda] test below
  for (std::string spec : {"cuda", "cuda:0", "cuda:3"}) {
    INFO(spec);
    CHECK_THROWS_AS(resolve_device(request(spec)), ConfigError);
    CHECK_THROWS_WITH(resolve_device(request(spec)), Catch::Contains("--device") && Catch::Contains("cpu"));
  }
}

TEST_CASE("resolve_device: cuda is cuda:LOCAL_RANK, and missing GPUs and cuda:N in a data-parallel world are refused",
          "[cuda]") {
  PARLA_REQUIRE_CUDA();
  const int gpus = static_cast<int>(torch::cuda::device_count());
  CHECK(resolve_device(request("cuda")) == c10::Device(c10::DeviceType::CUDA, 0));
  CHECK(resolve_device(request("cuda:0")) == c10::Device(c10::DeviceType::CUDA, 0));
  CHECK(resolve_device(request("auto", "runtime.device", gpus, gpus - 1)) ==
        c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(gpus - 1)));
  const std::string past = "cuda:" + std::to_string(gpus);  // cuda:1 on a one-GPU machine
  CHECK_THROWS_AS(resolve_device(request(past)), ConfigError);
  CHECK_THROWS_WITH(resolve_device(request(past)), Catch::Contains("--device") && Catch::Contains("does not exist"));
  CHECK_THROWS_WITH(resolve_device(request("cuda", "runtime.device", gpus + 1, gpus)),
                    Catch::Contains("runtime.device") && Catch::Contains("LOCAL_RANK"));
  CHECK_THROWS_AS(resolve_device(request("cuda:0", "runtime.device", 2, 0)), ConfigError);
  CHECK_THROWS_WITH(resolve_device(request("cuda:0", "runtime.device", 2, 0)),
                    Catch::Contains("runtime.device") && Catch::Contains("WORLD_SIZE"));
}

TEST_CASE("resolve_precision: fp32 and bf16 on a CPU, while fp16 on a CPU and int8 in training are refused naming the key") {
  using parla::Precision;
  const c10::Device cpu(c10::DeviceType::CPU);
  CHECK(resolve_precision(Precision::kFp32, cpu, "decoding.precision") == c10::ScalarType::Float);
  CHECK(resolve_precision(Precision::kBf16, cpu, "decoding.precision") == c10::ScalarType::BFloat16);
  CHECK_THROWS_AS(resolve_precision(Precision::kFp16, cpu, "decoding.precision"), ConfigError);
  CHECK_THROWS_WITH(resolve_precision(Precision::kFp16, cpu, "decoding.precision"), Catch::Contains("decoding.precision"));
  CHECK_THROWS_WITH(resolve_precision(Precision::kInt8, cpu, "training.precision"), Catch::Contains("training.precision"));
}

TEST_CASE("is_out_of_memory: CUDA's OutOfMemoryError and the CPU allocator's failure, nothing else") {
  using parla::runtime::is_out_of_memory;
  bool cuda_oom = false, other = true;
  try {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory. Tried to allocate 2.00 GiB");
  } catch (const std::exception& e) {
    cuda_oom = is_out_of_memory(e);
  }
  CHECK(cuda_oom);
  bool cpu_oom = false;
  try {
    // What the CPU allocator really throws for an impossible size (a plain c10::Error).
    auto t = torch::empty({int64_t{1} << 40, int64_t{1} << 20}, torch::kFloat);
    (void)t;
  } catch (const std::exception& e) {
    cpu_oom = is_out_of_memory(e);
  }
  CHECK(cpu_oom);
  try {
    TORCH_CHECK(false, "shape mismatch");
  } catch (const std::exception& e) {
    other = is_out_of_memory(e);
  }
  CHECK_FALSE(other);
  CHECK_FALSE(is_out_of_memory(std::runtime_error("cannot read file")));
}

TEST_CASE("data.pad_to_multiple: 0 means 8 on CUDA and 1 elsewhere, and a value given is kept") {
  CHECK(parla::runtime::resolve_pad_to_multiple(0, c10::Device(c10::DeviceType::CPU)) == 1);
  CHECK(parla::runtime::resolve_pad_to_multiple(0, c10::Device(c10::DeviceType::CUDA, 0)) == 8);
  CHECK(parla::runtime::resolve_pad_to_multiple(4, c10::Device(c10::DeviceType::CPU)) == 4);
  CHECK(parla::runtime::resolve_pad_to_multiple(1, c10::Device(c10::DeviceType::CUDA, 0)) == 1);
}

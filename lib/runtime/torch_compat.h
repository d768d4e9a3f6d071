#pragma once
// The only place that knows which LibTorch parla was compiled against: Debian's 1.13 (CPU only) or the 2.x inside
// the PyTorch wheel (CUDA). Everything that differs between their C++ APIs is wrapped here; no other file tests
// TORCH_VERSION_MAJOR. Torch-using code only (like runtime/runtime.cpp).
#include <ATen/autocast_mode.h>
#include <ATen/Context.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <c10/core/Allocator.h>
#include <c10/util/string_utils.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#define PARLA_TORCH2 1
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#else
#define PARLA_TORCH2 0
#endif

namespace parla::compat {

// "1.13.1", "2.11.0": what the build was compiled against.
inline const char* torch_version() { return TORCH_VERSION; }

// What a c10d process group's backend (Gloo, NCCL) is: 1.13's ProcessGroupGloo derives from ProcessGroup, 2.x's
// from Backend; both offer the collectives parla calls (broadcast, allreduce, barrier).
#if PARLA_TORCH2
using CollectiveBackend = c10d::Backend;
#else
using CollectiveBackend = c10d::ProcessGroup;
#endif

// Autocast (mixed precision) for one device type: LibTorch 1.13 has per-device functions (set_enabled for CUDA,
// set_cpu_enabled), 2.x one pair taking the device type.
inline void set_autocast(c10::DeviceType type, bool enabled, c10::ScalarType dtype) {
#if PARLA_TORCH2
  at::autocast::set_autocast_dtype(type, dtype);
  at::autocast::set_autocast_enabled(type, enabled);
#else
  if (type == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}

inline bool autocast_enabled(c10::DeviceType type) {
#if PARLA_TORCH2
  return at::autocast::is_autocast_enabled(type);
#else
  return type == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

inline c10::ScalarType autocast_dtype(c10::DeviceType type) {
#if PARLA_TORCH2
  return at::autocast::get_autocast_dtype(type);
#else
  return type == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                       : at::autocast::get_autocast_cpu_dtype();
#endif
}

// Turns autocast off for one device type while alive and restores it after: for computations that need fp32
// under mixed precision (an iterative pseudo-inverse, exponentials of random features).
class AutocastOff {
 public:
  explicit AutocastOff(c10::DeviceType type)
      : type_(type), was_(autocast_enabled(type)), dtype_(autocast_dtype(type)) {
    if (was_) set_autocast(type_, false, dtype_);
  }
  ~AutocastOff() {
    if (was_) set_autocast(type_, true, dtype_);
  }
  AutocastOff(const AutocastOff&) = delete;
  AutocastOff& operator=(const AutocastOff&) = delete;

 private:
  c10::DeviceType type_;
  bool was_;
  c10::ScalarType dtype_;
};

// A fresh generator on `device`, seeded. 1.13 (Debian) has no CUDA, so a CUDA device there is a usage error that
// runtime::resolve_device has already refused.
inline at::Generator make_generator(const c10::Device& device, uint64_t seed) {
  if (device.is_cpu()) return at::detail::createCPUGenerator(seed);
#if PARLA_TORCH2
  auto gen = at::detail::getCUDAHooks().getNewGenerator(device.has_index() ? device.index() : 0);
  gen.set_current_seed(seed);
  return gen;
#else
  TORCH_CHECK(false, "this LibTorch (", TORCH_VERSION, ") has no generator for ", device.str());
#endif
}

// Whether GPU `index` computes in bfloat16 (compute capability 8.0 or newer, as torch.cuda.is_bf16_supported).
inline bool cuda_supports_bf16(c10::DeviceIndex index) {
#if PARLA_TORCH2
  (void)index;  // the hook asks the current device, which runtime::resolve_device has set
  return at::detail::getCUDAHooks().supportsBFloat16ConvolutionWithCuDNNv8();
#else
  (void)index;
  return false;
#endif
}

// The process-wide default generator of a device (dropout draws from it).
inline at::Generator default_generator(const c10::Device& device) {
  return at::globalContext().defaultGenerator(device);
}

// Whether this LibTorch has fused scaled dot-product attention (2.x; 1.13 has only a private prototype).
inline constexpr bool has_fused_attention() { return PARLA_TORCH2 != 0; }

// softmax(q k^T / sqrt(Dh) masked) v in one fused kernel (flash / memory-efficient / math, chosen by LibTorch).
// q [B, H, Tq, Dh], k and v [B, H, Tk, Dh]; allowed: bool broadcastable to [B, H, Tq, Tk], true = may attend, or
// undefined; is_causal: the causal mask (Tq == Tk), only with `allowed` undefined (LibTorch refuses both).
// dropout_p: dropout on the attention weights, drawn inside the kernel. Returns an undefined tensor where this
// LibTorch has no such kernel (1.13): callers then run their explicit path.
inline at::Tensor scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               const at::Tensor& allowed, double dropout_p, bool is_causal) {
#if PARLA_TORCH2
  return at::scaled_dot_product_attention(q, k, v, allowed.defined() ? std::optional<at::Tensor>(allowed)
                                                                     : std::optional<at::Tensor>(),
                                          dropout_p, is_causal);
#else
  (void)q, (void)k, (void)v, (void)allowed, (void)dropout_p, (void)is_causal;
  return at::Tensor();
#endif
}

// The key under which a LibTorch optimizer keeps a parameter's state (Optimizer::state()): 1.13 the address of its
// TensorImpl as text, 2.x the pointer itself.
inline auto optimizer_state_key(const at::Tensor& p) {
#if PARLA_TORCH2
  return static_cast<void*>(p.unsafeGetTensorImpl());
#else
  return c10::guts::to_string(p.unsafeGetTensorImpl());
#endif
}

// A CPU allocator that hands every request to `inner` after telling `observe` its size (which may throw to
// refuse it). 1.13's Allocator::allocate is const and has no copy_data; 2.x's allocate is not, and copy_data is
// required.
class ObservedAllocator : public c10::Allocator {
 public:
  ObservedAllocator(c10::Allocator* inner, void (*observe)(size_t)) : inner_(inner), observe_(observe) {}
#if PARLA_TORCH2
  c10::DataPtr allocate(size_t n) override {
    observe_(n);
    return inner_->allocate(n);
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override { inner_->copy_data(dest, src, count); }
  bool is_simple_data_ptr(const c10::DataPtr& p) const override { return inner_->is_simple_data_ptr(p); }
#else
  c10::DataPtr allocate(size_t n) const override {
    observe_(n);
    return inner_->allocate(n);
  }
#endif
  c10::DeleterFnPtr raw_deleter() const override { return inner_->raw_deleter(); }

 private:
  c10::Allocator* inner_;
  void (*observe_)(size_t);
};

}  // namespace parla::compat

#pragma once
// A cap on what LibTorch allocates on the CPU, on this thread, while an AllocationBudget lives. A model built from
// a config read out of a file (a checkpoint someone else wrote) allocates what that config says: a vocabulary or
// a d_model that claims terabytes would be allocated before any weight is compared. Under a budget derived from
// the file's size, such a config is refused at its first allocation past the cap instead.
#include <cstddef>
#include <cstdint>

#include "core/config/model_config.h"

namespace parla::models {

// What a model's modules take beyond their tensors' bytes (the C++ module objects, parameter names, tensor
// headers), which the allocator never sees: a file that asks for a million layers of width 1 holds next to no
// weights but builds gigabytes of modules. Measured as the peak resident memory of building 8,000 layers of
// d_model 1 less that of one layer (encoder 17.6 KB, decoder 28.3 KB, BERT 14.9 KB, RNN 13.6 KB per rnn_layers),
// rounded up by half again.
inline constexpr uint64_t kEncoderLayerOverhead = 27u << 10, kDecoderLayerOverhead = 43u << 10,
                          kRnnLayerOverhead = 21u << 10;
uint64_t module_overhead_bytes(const ModelConfig& cfg);

// Called by the CPU allocator for every allocation: counts it against this thread's budget, if any, and throws
// std::bad_alloc past its limit.
void charge_allocation(size_t n);

class AllocationBudget {
 public:
  explicit AllocationBudget(uint64_t limit_bytes);
  ~AllocationBudget();
  AllocationBudget(const AllocationBudget&) = delete;
  AllocationBudget& operator=(const AllocationBudget&) = delete;

  uint64_t limit() const { return limit_; }
  uint64_t used() const { return used_; }
  // True once an allocation was refused (the exception LibTorch then raised may have been rewrapped).
  bool exceeded() const { return exceeded_; }
  // Whether this LibTorch's CPU allocations pass through the budget (false if something else replaced the CPU
  // allocator; the budget then cannot refuse anything).
  static bool effective();

 private:
  friend void charge_allocation(size_t n);
  uint64_t limit_, used_ = 0;
  bool exceeded_ = false;
  AllocationBudget* outer_;
};

}  // namespace parla::models

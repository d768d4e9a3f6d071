#pragma once
// A cap on what LibTorch allocates on the CPU, on this thread, while an AllocationBudget lives. A model built from
// a config read out of a file (a checkpoint someone else wrote) allocates what that config says: a vocabulary or
// a d_model that claims terabytes would be allocated before any weight is compared. Under a budget derived from
// the file's size, such a config is refused at its first allocation past the cap instead.
#include <cstddef>
#include <cstdint>

namespace parla::models {

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

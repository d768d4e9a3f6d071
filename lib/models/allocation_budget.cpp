#include "models/allocation_budget.h"

#include <mutex>
#include <new>

#include <c10/core/CPUAllocator.h>

#include "runtime/torch_compat.h"

namespace parla::models {

namespace {

thread_local AllocationBudget* current = nullptr;

compat::ObservedAllocator* installed() {
  static compat::ObservedAllocator* allocator = [] {
    // Wraps whatever CPU allocator LibTorch has at the first use; outside a budget it only forwards (one
    // thread-local read per allocation).
    auto* a = new compat::ObservedAllocator(c10::GetCPUAllocator(), &charge_allocation);
    c10::SetCPUAllocator(a, /*priority=*/0);
    return a;
  }();
  return allocator;
}

}  // namespace

uint64_t module_overhead_bytes(const ModelConfig& cfg) {
  const auto count = [](int n) { return static_cast<uint64_t>(n > 0 ? n : 0); };
  switch (cfg.type) {
    case ModelType::kRnn:
      return count(cfg.rnn_layers) * kRnnLayerOverhead;
    case ModelType::kBert:
      return count(cfg.encoder_layers) * kEncoderLayerOverhead;
    case ModelType::kTransformer:
      break;
  }
  return count(cfg.encoder_layers) * kEncoderLayerOverhead + count(cfg.decoder_layers) * kDecoderLayerOverhead;
}

void charge_allocation(size_t n) {
  AllocationBudget* b = current;
  if (!b) return;
  b->used_ += n;
  if (b->used_ > b->limit_) {
    b->exceeded_ = true;
    throw std::bad_alloc();
  }
}

AllocationBudget::AllocationBudget(uint64_t limit_bytes) : limit_(limit_bytes), outer_(current) {
  installed();
  current = this;
}

AllocationBudget::~AllocationBudget() { current = outer_; }

bool AllocationBudget::effective() { return c10::GetCPUAllocator() == installed(); }

}  // namespace parla::models

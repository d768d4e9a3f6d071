#pragma once
// Points where tests inject the faults a real run meets rarely (Marian's and fairseq's loops have no such hooks;
// parla's tests need them to prove the recovery paths): a diverging loss, an allocator running out of memory
// before a forward pass or during a backward pass, a signal arriving mid-run. The update step calls every hook
// at its point; the defaults do nothing, and a run without faults (every real run) passes none.
#include <cstdint>

#include "data/batch.h"
#include "train/task.h"

namespace parla::train {

class UpdateFaults {
 public:
  virtual ~UpdateFaults() = default;
  // Before an update's batches are counted and its shutdown vote is cast. `update`: 0-based, counting skipped
  // updates too.
  virtual void before_update(int64_t /*update*/) {}
  // A batch's loss terms, inside the forward pass, before they are summed and scaled for backward.
  virtual void after_loss(int64_t /*update*/, LossTerms& /*terms*/) {}
  // Before a batch is moved to the device for its forward pass, and after its backward pass added its gradient
  // to .grad (when the batch had any item). A throw here is handled as one from the forward or backward pass.
  virtual void before_forward(const data::Batch& /*batch*/) {}
  virtual void after_backward(const data::Batch& /*batch*/) {}
};

}  // namespace parla::train

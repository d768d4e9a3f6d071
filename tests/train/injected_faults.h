#pragma once
// The faults tests inject into the trainer's update step (train/update_faults.h): a diverging loss, an allocator
// running out of memory, a signal mid-run.
#include <csignal>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>

#include <c10/util/Exception.h>

#include "train/update_faults.h"

namespace parla::test {

// Multiplies the loss of the updates `which` picks (0-based, skipped updates counted) by NaN, as a diverging model
// would produce.
class NanLoss : public train::UpdateFaults {
 public:
  explicit NanLoss(std::function<bool(int64_t)> which) : which_(std::move(which)) {}
  void after_loss(int64_t update, train::LossTerms& terms) override {
    if (!which_(update)) return;
    for (auto& s : terms.sums) s = s * std::numeric_limits<double>::quiet_NaN();
  }

 private:
  std::function<bool(int64_t)> which_;
};

// A training batch of more than `sentences` sentences fails with an out-of-memory c10 error, as a GPU allocator
// would throw (0: even one sentence fails); before its forward pass, or after its backward pass (with the batch's
// gradient already added to .grad: the worst case of an allocation failing during backward).
class OutOfMemoryAbove : public train::UpdateFaults {
 public:
  OutOfMemoryAbove(int64_t sentences, bool after_backward) : sentences_(sentences), after_backward_(after_backward) {}
  void before_forward(const data::Batch& b) override {
    if (!after_backward_) fail_above(b.sentences);
  }
  void after_backward(const data::Batch& b) override {
    if (after_backward_) fail_above(b.sentences);
  }

 private:
  void fail_above(int64_t n) const {
    TORCH_CHECK_WITH(OutOfMemoryError, n <= sentences_, "out of memory: injected for a batch of ", n,
                     " sentences (OutOfMemoryAbove)");
  }
  int64_t sentences_;
  bool after_backward_;
};

// Raises `signal` as update `update` begins, before its shutdown vote.
class SignalAt : public train::UpdateFaults {
 public:
  SignalAt(int64_t update, int signal) : update_(update), signal_(signal) {}
  void before_update(int64_t update) override {
    if (update == update_) std::raise(signal_);
  }

 private:
  int64_t update_;
  int signal_;
};

}  // namespace parla::test

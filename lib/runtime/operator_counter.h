#pragma once
// Counting what a GPU pays for (issue 55): the ATen operators each thread calls at its top level (each one or more
// kernel launches on a GPU; the operators an operator calls inside are its own business), by phase, and the host
// syncs. The phases are RecordFunction user scopes the training loop opens (kForwardScope, kUpdateScope) and
// autograd's backward functions; a host sync is a read through the loop's HostReads (kHostReadScope), or an
// .item() or nonzero() inside a phase, where the tensor would live on the device. A RecordFunction callback, on the
// CPU as on CUDA: the counts are the same on both, which is what makes them provable without a GPU.
#include <cstdint>
#include <map>
#include <string>

namespace parla::runtime {

inline constexpr const char* kStepScope = "parla::train_step";  // one update: reading batches to the optimizer
inline constexpr const char* kForwardScope = "parla::forward";
inline constexpr const char* kUpdateScope = "parla::update";
inline constexpr const char* kHostReadScope = "parla::host_read";
// Work on tensors that are on the host whatever the device (the CPU embedding's id check): no sync on a GPU.
inline constexpr const char* kHostOnlyScope = "parla::host_only";

struct OperatorCounts {
  // Top-level operators inside training steps, by phase (other: the step's own, e.g. moving batches to the device).
  int64_t forward = 0, backward = 0, update = 0, other = 0;
  int64_t host_syncs = 0;
  // Each phase's operators by name (what to remove next), and the host syncs outside HostReads by name.
  std::map<std::string, int64_t> forward_ops, backward_ops, update_ops, other_ops, sync_ops;
  int64_t total() const { return forward + backward + update + other; }
};

// While alive, every RecordFunction is observed (one counter at a time; a second is a logic error).
class OperatorCounter {
 public:
  OperatorCounter();
  ~OperatorCounter();
  OperatorCounter(const OperatorCounter&) = delete;
  OperatorCounter& operator=(const OperatorCounter&) = delete;

  OperatorCounts counts() const;
  void reset();
};

}  // namespace parla::runtime

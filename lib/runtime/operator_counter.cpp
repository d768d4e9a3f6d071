#include "runtime/operator_counter.h"

#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include <ATen/record_function.h>
#include <c10/util/Exception.h>

namespace parla::runtime {
namespace {

enum OpPhase { kOpOther, kOpForward, kOpUpdate, kOpBackward, kOpPhases };

struct OpTotals {
  std::atomic<int64_t> by_phase[kOpPhases];
  std::atomic<int64_t> host_syncs{0};
  std::mutex mutex;
  std::map<std::string, int64_t> ops[kOpPhases], syncs;
};
OpTotals op_totals;
std::atomic<bool> op_installed{false};
at::CallbackHandle op_handle = 0;

// Per thread: how deep in operators and backward functions, and the user scopes open.
struct OpThreadState {
  int operators = 0, backward = 0, host_reads = 0;
  std::vector<OpPhase> scopes;  // kOpOther: the training step outside its phases
};
thread_local OpThreadState op_thread;

// The operators that wait for a device's result on the host: .item() (and the _local_scalar_dense inside it),
// a tensor's truth value, nonzero (whose output size the host must learn).
bool op_is_sync(const char* name) {
  for (const char* sync : {"aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::nonzero"})
    if (std::strcmp(name, sync) == 0) return true;
  return false;
}

bool op_is_backward_wrapper(const char* name) {
  static const char kPrefix[] = "autograd::engine::evaluate_function";
  return std::strncmp(name, kPrefix, sizeof(kPrefix) - 1) == 0;
}

std::unique_ptr<at::ObserverContext> op_on_start(const at::RecordFunction& fn) {
  const char* name = fn.name();
  switch (fn.scope()) {
    case at::RecordScope::USER_SCOPE:
      if (std::strcmp(name, kStepScope) == 0) op_thread.scopes.push_back(kOpOther);
      else if (std::strcmp(name, kForwardScope) == 0) op_thread.scopes.push_back(kOpForward);
      else if (std::strcmp(name, kUpdateScope) == 0) op_thread.scopes.push_back(kOpUpdate);
      else if (std::strcmp(name, kHostReadScope) == 0) ++op_thread.host_reads, ++op_totals.host_syncs;
      else if (std::strcmp(name, kHostOnlyScope) == 0) ++op_thread.host_reads;
      break;
    case at::RecordScope::BACKWARD_FUNCTION:
      ++op_thread.backward;
      break;
    case at::RecordScope::FUNCTION: {
      // LibTorch 1.13 wraps each backward function in a FUNCTION record of this name: a phase, not an operator.
      if (op_is_backward_wrapper(name)) {
        ++op_thread.backward;
        break;
      }
      if (op_thread.operators++ > 0) break;
      // Outside a training step (set-up, validation, saving) nothing is counted; backward functions run on
      // autograd's threads, within no user scope of theirs.
      if (op_thread.backward == 0 && op_thread.scopes.empty()) break;
      const OpPhase phase = op_thread.backward > 0 ? kOpBackward : op_thread.scopes.back();
      ++op_totals.by_phase[phase];
      const bool sync = phase != kOpOther && op_thread.host_reads == 0 && op_is_sync(name);
      if (sync) ++op_totals.host_syncs;
      std::lock_guard<std::mutex> lock(op_totals.mutex);
      ++op_totals.ops[phase][name];
      if (sync) ++op_totals.syncs[name];
      break;
    }
    default:
      break;
  }
  return nullptr;
}

void op_on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  const char* name = fn.name();
  switch (fn.scope()) {
    case at::RecordScope::USER_SCOPE:
      if ((std::strcmp(name, kStepScope) == 0 || std::strcmp(name, kForwardScope) == 0 ||
           std::strcmp(name, kUpdateScope) == 0) &&
          !op_thread.scopes.empty())
        op_thread.scopes.pop_back();
      else if ((std::strcmp(name, kHostReadScope) == 0 || std::strcmp(name, kHostOnlyScope) == 0) &&
               op_thread.host_reads > 0)
        --op_thread.host_reads;
      break;
    case at::RecordScope::BACKWARD_FUNCTION:
      if (op_thread.backward > 0) --op_thread.backward;
      break;
    case at::RecordScope::FUNCTION:
      if (op_is_backward_wrapper(name)) {
        if (op_thread.backward > 0) --op_thread.backward;
      } else if (op_thread.operators > 0) {
        --op_thread.operators;
      }
      break;
    default:
      break;
  }
}

}  // namespace

OperatorCounter::OperatorCounter() {
  TORCH_CHECK(!op_installed.exchange(true), "one OperatorCounter at a time");
  reset();
  op_handle = at::addGlobalCallback(at::RecordFunctionCallback(op_on_start, op_on_end)
                                     .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                                              at::RecordScope::USER_SCOPE}));
}

OperatorCounter::~OperatorCounter() {
  at::removeCallback(op_handle);
  op_installed = false;
}

OperatorCounts OperatorCounter::counts() const {
  OperatorCounts c;
  c.other = op_totals.by_phase[kOpOther];
  c.forward = op_totals.by_phase[kOpForward];
  c.update = op_totals.by_phase[kOpUpdate];
  c.backward = op_totals.by_phase[kOpBackward];
  c.host_syncs = op_totals.host_syncs;
  std::lock_guard<std::mutex> lock(op_totals.mutex);
  c.forward_ops = op_totals.ops[kOpForward];
  c.backward_ops = op_totals.ops[kOpBackward];
  c.update_ops = op_totals.ops[kOpUpdate];
  c.other_ops = op_totals.ops[kOpOther];
  c.sync_ops = op_totals.syncs;
  return c;
}

void OperatorCounter::reset() {
  for (auto& n : op_totals.by_phase) n = 0;
  op_totals.host_syncs = 0;
  std::lock_guard<std::mutex> lock(op_totals.mutex);
  for (auto& m : op_totals.ops) m.clear();
  op_totals.syncs.clear();
}

}  // namespace parla::runtime

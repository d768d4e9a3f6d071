#pragma once
// One optimizer update of the training loop (Marian's graph group, fairseq's trainer.train_step): forward and
// backward over this rank's accumulated batches, a batch that runs out of memory retried as two halves,
// data-parallel gradient summation, fp16 dynamic loss scaling, gradient clipping, NaN/inf skipping, the AdamW step
// at the scheduled learning rate and the weight average's update.
//
// Normalisation: each loss term is a SUM over items, divided by its item count over the whole update (every
// accumulated batch on every rank, one all-reduce of the counts before the forward passes). Summing the ranks'
// gradients then gives exactly the gradient of one large batch.
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/record_function.h>
#include <torch/torch.h>

#include "core/config.h"
#include "data/batch.h"
#include "runtime/operator_counter.h"
#include "train/distributed.h"
#include "train/learner.h"
#include "train/task.h"
#include "train/training_state.h"
#include "train/update_faults.h"

namespace parla::train {

// Device-to-host reads of training figures: the loop's every read goes through here and is counted
// (TrainResult::host_reads), so a test can prove the loop does not synchronise per batch.
struct HostReads {
  int64_t count = 0;
  torch::Tensor operator()(const torch::Tensor& t) {
    RECORD_USER_SCOPE(runtime::kHostReadScope);  // what runtime::OperatorCounter counts as a host sync
    ++count;
    return t.to(torch::kCPU).contiguous();
  }
};

// What one update left on the device until the next progress line reads it (one read for the whole interval).
struct PendingUpdate {
  bool skipped = false;
  torch::Tensor stats;          // float64 [terms + 1]: each term's loss sum over the update, then the nll sum
  std::vector<double> counts;   // the update's global item count per term (host: known before the forward pass)
};

// This rank's batches of one update after their forward and backward passes: the global counts and votes, and the
// update's figures still on the device.
struct AccumulatedUpdate {
  std::vector<double> global;  // item count per term, summed over ranks
  bool stop_votes = false;     // some rank received a shutdown signal
  double tokens = 0;           // source + target tokens of the update, over ranks
  torch::Tensor stats;         // float64 [terms + 1] on the device: each term's loss sum, then the nll sum
};

struct UpdateOutcome {
  bool applied = false;   // the optimizer step was taken (false: skipped for NaN/inf or an fp16 overflow)
  PendingUpdate pending;
  torch::Tensor grad_norm;  // the update's gradient norm before clipping, on the device
  double items = 0;       // the update's term-0 items over ranks (tokens for translation)
  double tokens = 0;
};

class UpdateStep {
 public:
  // Updates `learner`'s model, optimizer, loss scaler and average. `faults` may be null (every real run).
  UpdateStep(const TrainingConfig& config, Task& task, Learner& learner, DataParallel& dp,
             std::shared_ptr<UpdateFaults> faults);

  // Counts the items of this rank's batches, casts its shutdown vote (one collective for both), and runs their
  // forward and backward passes: gradients summed into .grad, figures into the result's stats.
  // `oom_retries` counts the batches retried as halves.
  AccumulatedUpdate accumulate(const std::vector<data::Batch>& batches, const TrainingState& state,
                               int64_t& oom_retries);
  // Sums the gradients over ranks, unscales and clips them and, when the loss and the gradient are finite, takes
  // the optimizer step (state.step advances); otherwise skips it (counting bad steps, halving an fp16 scale).
  // Throws DataError when training.max_bad_steps updates in a row were skipped.
  UpdateOutcome apply(const AccumulatedUpdate& update, TrainingState& state, HostReads& reads);

 private:
  torch::Tensor train_on_batch(const data::Batch& cpu_batch, const std::vector<double>& global, bool& in_backward);
  void train_batches(const std::vector<data::Batch>& batches, const std::vector<double>& global,
                     torch::Tensor& stats, const TrainingState& state, int64_t& oom_retries);
  // The parameters' gradients that are defined.
  std::vector<torch::Tensor> gradients() const;

  const TrainingConfig& t_;
  Task& task_;
  Learner& learner_;
  DataParallel& dp_;
  const torch::Device device_;  // the learner's, read per batch
  std::shared_ptr<UpdateFaults> faults_;
  std::vector<torch::Tensor> params_;
  int64_t update_index_ = 0;  // updates so far in this run, skipped ones included
};

// Rows [start, start + n) of a batch, without the padding columns that only longer rows needed.
data::Batch batch_rows(const data::Batch& b, int64_t start, int64_t n);

}  // namespace parla::train

#pragma once
// parla-train's training run (fairseq's train.py; Marian's training/graph_group + scheduler): the public face and
// the composition of the parts, each in a file of its own:
//   train/training_scheduler.h  when to stop (max_steps, max_epochs, max_time, early stopping, a signal), validate
//                               and save, which numbered checkpoints to prune;
//   train/update_step.h         one update: forward/backward over the accumulated batches (out-of-memory halves),
//                               data-parallel gradient sums, fp16 loss scaling, clipping, NaN/inf skipping, AdamW;
//   train/training_reporter.h   progress lines on stderr and the metrics JSON-lines records;
//   train/training_state.h      what a resumed run continues from; train/task.h: the loss and validation.
// The trainer reads the dataset, builds the task and optimizer, resumes or starts, runs the loop over token-budget
// batches reshuffled each epoch from the seed, and writes the atomic checkpoints (last K, last, best, ema).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "train/stop_reason.h"

namespace parla::train {

class DataParallel;
class UpdateFaults;

struct TrainerOptions {
  // Checkpoint to resume from ("" = start fresh). The model config must match the checkpoint's.
  std::string resume;
  // Start fresh even when save_dir already has a checkpoint_last.pt (it is overwritten as training proceeds).
  bool overwrite = false;
  // Faults a test injects into the update step (train/update_faults.h); null in every real run.
  std::shared_ptr<UpdateFaults> faults;
};

struct TrainResult {
  int64_t steps = 0;            // optimizer updates taken in total
  int64_t epoch = 0;
  int64_t skipped_steps = 0;    // updates skipped for a NaN/inf loss or gradient (fp16 overflows excepted)
  int64_t overflow_steps = 0;   // fp16: updates skipped because the loss scale overflowed (0 otherwise)
  double loss_scale = 0;        // fp16: the dynamic loss scale at the end (0 otherwise)
  StopReason stop_reason = StopReason::kNone;
  // Resumed from a checkpoint that had already reached `stop_reason`: nothing trained, validated or written.
  bool already_finished = false;
  int signal = 0;               // the signal that stopped training, 0 otherwise
  std::vector<double> losses;   // per update of this run: training loss per item (NaN for skipped updates)
  nlohmann::json last_validation;  // empty when training ended without validating
  // Device-to-host reads of training figures by the loop: one per update (the finite flags) plus one per progress
  // line and one at the end (the figures accumulated since). Validation's reads are not counted.
  int64_t host_reads = 0;
  int64_t oom_retries = 0;      // batches that ran out of memory and were retried as two halves
};

class Trainer {
 public:
  // Reads the dataset at cfg.data.dir and builds the task's model. Throws ConfigError/DataError/UsageError
  // naming the key or file before any training starts.
  Trainer(const Config& cfg, TrainerOptions options, std::shared_ptr<DataParallel> dp = nullptr);
  ~Trainer();
  TrainResult run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The effective config must name a dataset, an output directory and some way to stop. Throws ConfigError.
void check_training_config(const Config& cfg);

// Model-section keys whose values differ between two effective configs (as JSON), as "model.KEY (a vs b)". A
// key missing from the checkpoint's config (written before parla had it) counts as its default value.
std::vector<std::string> model_config_differences(const nlohmann::json& checkpoint, const nlohmann::json& current);

}  // namespace parla::train

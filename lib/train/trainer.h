#pragma once
// The training loop of parla-train (fairseq's train.py / Marian's training/graph_group + scheduler in one place):
// token-budget batches reshuffled each epoch from the seed, gradient accumulation over update_freq batches,
// data-parallel gradient summation (train/distributed.h), AdamW with a warm-up schedule, gradient clipping,
// NaN/inf skipping, mixed precision (bf16/fp16 autocast, fp16 dynamic loss scaling), validation with early stopping,
// atomic checkpoints (last K, last, best) that resume exactly, progress lines on stderr and a metrics JSON-lines file.
//
// Normalisation: each loss term is a SUM over items, divided by its item count over the whole update (every
// accumulated batch on every rank, one all-reduce of the counts before the forward passes). Summing the ranks'
// gradients then gives exactly the gradient of one large batch.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"

namespace parla::train {

class DataParallel;

struct TrainerOptions {
  // Checkpoint to resume from ("" = start fresh). The model config must match the checkpoint's.
  std::string resume;
  // Start fresh even when save_dir already has a checkpoint_last.pt (it is overwritten as training proceeds).
  bool overwrite = false;
  // Testing hook: when it returns true for an update index (0-based, counting skipped updates too), that
  // update's loss is multiplied by NaN, as a diverging model would produce.
  std::function<bool(int64_t)> poison_update;
  // Testing hook (negative = off): a training batch of more than this many sentences fails with an out-of-memory
  // c10 error, as a GPU allocator would throw; the trainer retries it as two halves (0: even one sentence fails).
  int64_t inject_oom_above_sentences = -1;
  // With the hook above: fail after the batch's backward pass instead of before its forward pass, i.e. with the
  // batch's gradient already added to .grad (the worst case of an allocation failing during backward).
  bool inject_oom_after_backward = false;
};

struct TrainResult {
  int64_t steps = 0;            // optimizer updates taken in total
  int64_t epoch = 0;
  int64_t skipped_steps = 0;    // updates skipped for a NaN/inf loss or gradient (fp16 overflows excepted)
  int64_t overflow_steps = 0;   // fp16: updates skipped because the loss scale overflowed (0 otherwise)
  double loss_scale = 0;        // fp16: the dynamic loss scale at the end (0 otherwise)
  std::string stop_reason;      // max_steps, max_epochs, max_time, early_stopping, signal
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

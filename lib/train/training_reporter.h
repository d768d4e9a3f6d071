#pragma once
// What training tells its operator (Marian's scheduler display, fairseq's progress_bar + metrics): the progress
// line on stderr every training.log_every steps (interval means of loss and perplexity, learning rate, gradient
// norm, throughput, elapsed time and ETA), the validation line, the closing line, and the same figures as records
// of the metrics JSON-lines log (train/metrics_log.h). The updates' figures stay on the device between progress
// lines and are read in one copy per line. Only rank 0 writes; every rank keeps the per-update losses.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/config.h"
#include "train/stop_reason.h"
#include "train/learner.h"
#include "train/metrics_log.h"
#include "train/task.h"
#include "train/training_state.h"
#include "train/update_step.h"

namespace parla::train {

class TrainingReporter {
 public:
  using Clock = std::chrono::steady_clock;
  // `start`, `start_step`: when and at which step this run's training began (for throughput and the ETA). The
  // learner's schedule gives the learning rate, and under fp16 its loss scaler the scale reported.
  TrainingReporter(const TrainingConfig& config, const Task& task, const Learner& learner, bool master,
                   MetricsLog& metrics, HostReads& reads, Clock::time_point start, int64_t start_step);

  void training_begins(int64_t parameters, const std::string& device, int world, size_t pairs, size_t batches) const;
  void epoch_begins(int64_t epoch, size_t batches) const;
  // Takes an update's figures (still on the device) into the current interval.
  void add(const UpdateOutcome& update);
  // The interval since the last progress line holds taken updates.
  bool has_interval() const { return iv_count_ > 0; }
  // Reads the interval's figures, writes the progress line and the "train" record, and starts a new interval.
  void progress(const TrainingState& state);
  // Reads the figures of updates not yet read (for losses()).
  void finish();
  // The validation line and its record `rec` (built by the trainer, who keeps it in the state's history).
  void validation(const TrainingState& state, const ValidationResult& r, const nlohmann::json& rec, bool improved,
                  double seconds);
  // The closing line: stopped by a signal, or done for `stop_reason`.
  void training_ends(const TrainingState& state, StopReason stop_reason, int signal,
                     const std::string& save_dir) const;

  // Per update of this run: training loss per item (NaN for skipped updates), as far as read.
  const std::vector<double>& losses() const { return losses_; }

 private:
  double flush();

  const TrainingConfig& t_;
  const Task& task_;
  const Learner& learner_;
  bool master_;
  MetricsLog& metrics_;
  HostReads& reads_;
  Clock::time_point start_;
  int64_t start_step_;
  // Updates whose figures are still on the device, and the last update's gradient norm (what progress lines
  // report).
  std::vector<PendingUpdate> pending_;
  torch::Tensor last_grad_norm_;
  // Interval figures for progress lines.
  double iv_loss_ = 0, iv_nll_ = 0, iv_count_ = 0, iv_tokens_ = 0;
  Clock::time_point iv_start_;
  std::vector<double> losses_;
};

}  // namespace parla::train

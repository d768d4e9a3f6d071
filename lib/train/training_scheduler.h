#pragma once
// When training stops, validates and saves (Marian's training/scheduler.h): the stop conditions (max_steps,
// max_epochs, max_time, early stopping after `patience` validations without a better early_stop_metric, a
// shutdown signal), the early-stopping bookkeeping of each validation, which updates validate and save, and which
// numbered checkpoints keep_last prunes. It decides from the TrainingState alone; the trainer acts.
#include <cstdint>
#include <functional>
#include <string>

#include "core/config.h"
#include "train/stop_reason.h"
#include "train/task.h"
#include "train/training_state.h"

namespace parla::train {

// A stop condition that already holds (TrainResult::stop_reason) and a sentence for the log.
struct StopDecision {
  StopReason reason = StopReason::kNone;
  std::string detail;
  explicit operator bool() const { return reason != StopReason::kNone; }
};

// What one validation means for training: the early-stopping metric improved (checkpoint_best.pt is written),
// and patience is used up (training stops).
struct ValidationVerdict {
  bool improved = false;
  bool patience_exhausted = false;
};

class TrainingScheduler {
 public:
  explicit TrainingScheduler(const TrainingConfig& config) : t_(config) {}

  // The stop conditions, one definition for the loop and for a resumed run's check before it starts.
  bool max_steps_reached(const TrainingState& s) const { return t_.max_steps > 0 && s.step >= t_.max_steps; }
  bool max_time_reached(const TrainingState& s) const { return t_.max_time > 0 && s.elapsed >= t_.max_time * 60; }
  // The last epoch allowed is used up (`plan_size`: batches of the current epoch's plan).
  bool max_epochs_reached(const TrainingState& s, size_t plan_size) const {
    return t_.max_epochs > 0 && s.epoch >= t_.max_epochs && s.batch_in_epoch >= static_cast<int64_t>(plan_size);
  }
  bool patience_exhausted(const TrainingState& s) const {
    return t_.patience > 0 && s.stale_validations >= t_.patience;
  }

  // A resumed state that already meets a stop condition of the (possibly changed) config, tested in the loop's
  // order; raising the limit on resume (--max-steps ...) trains on. `plan_size` gives the batches of the current
  // epoch's plan; it is called only when an epoch limit can apply.
  StopDecision finished_before_start(const TrainingState& s, const std::function<size_t()>& plan_size) const;

  // After an update: stop for a signal (any rank's vote), max_steps or max_time, in that order.
  StopReason stop_after_update(const TrainingState& s, bool stop_votes) const;

  // A progress line is due after this update (when the interval holds any items).
  bool log_due(const TrainingState& s) const { return s.step > 0 && s.step % t_.log_every == 0; }
  // Validation is due at every valid_every-th step, once.
  bool validation_due(const TrainingState& s) const {
    return t_.valid_every > 0 && s.step > 0 && s.step % t_.valid_every == 0 && s.last_valid_step != s.step;
  }
  // Training that stops for anything but a signal validates its last step, unless that step was just validated.
  bool validation_due_at_end(const TrainingState& s, StopReason stop_reason) const {
    return stop_reason != StopReason::kSignal && s.last_valid_step != s.step && s.step > 0;
  }
  // A numbered checkpoint is due every save_every steps (valid_every when 0), once per step.
  bool save_due(const TrainingState& s, bool saved_at_step) const {
    const int64_t save_every = t_.save_every > 0 ? t_.save_every : t_.valid_every;
    return save_every > 0 && s.step > 0 && s.step % save_every == 0 && !saved_at_step;
  }

  // Records a validation in the early-stopping state (best, best_step, stale_validations, last_valid_step).
  ValidationVerdict record_validation(TrainingState& s, const ValidationResult& r) const;
  // The early-stopping metric's value in a validation result (training.early_stop_metric).
  double metric_value(const ValidationResult& r) const;

  // Removes the oldest checkpoint_<step>.pt files of `save_dir` beyond training.keep_last.
  void prune_numbered_checkpoints(const std::string& save_dir) const;

 private:
  const TrainingConfig& t_;
};

}  // namespace parla::train

// The training scheduler's decisions (train/training_scheduler.h), from a TrainingState alone.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "core/config.h"
#include "support/temp_dir.h"
#include "train/training_scheduler.h"

using parla::TrainingConfig;
using parla::train::TrainingScheduler;
using parla::train::TrainingState;
using parla::train::ValidationResult;
namespace fs = std::filesystem;

using parla::train::StopReason;

TEST_CASE("the scheduler stops for a signal before max_steps before max_time, and only when one holds") {
  TrainingConfig t;
  t.max_steps = 10;
  t.max_time = 1;  // minutes
  TrainingScheduler s(t);
  TrainingState st;
  st.step = 9;
  st.elapsed = 30;
  CHECK(s.stop_after_update(st, false) == StopReason::kNone);
  CHECK(s.stop_after_update(st, true) == StopReason::kSignal);
  st.step = 10;
  st.elapsed = 60;
  CHECK(s.stop_after_update(st, false) == StopReason::kMaxSteps);
  st.step = 9;
  CHECK(s.stop_after_update(st, false) == StopReason::kMaxTime);
}

TEST_CASE("validation and saving are due at their intervals, once per step, and the end validates an unvalidated step") {
  TrainingConfig t;
  t.valid_every = 4;
  t.save_every = 0;  // follows valid_every
  t.log_every = 2;
  TrainingScheduler s(t);
  TrainingState st;
  st.step = 4;
  CHECK(s.validation_due(st));
  CHECK(s.save_due(st, /*saved_at_step=*/false));
  CHECK_FALSE(s.save_due(st, /*saved_at_step=*/true));
  CHECK(s.log_due(st));
  st.last_valid_step = 4;
  CHECK_FALSE(s.validation_due(st));
  CHECK_FALSE(s.validation_due_at_end(st, StopReason::kMaxSteps));
  st.step = 5;
  CHECK_FALSE(s.validation_due(st));
  CHECK_FALSE(s.log_due(st));
  CHECK(s.validation_due_at_end(st, StopReason::kMaxSteps));
  CHECK_FALSE(s.validation_due_at_end(st, StopReason::kSignal));
}

TEST_CASE("validations keep the best metric and exhaust patience, and a resumed finished run names its reason") {
  TrainingConfig t;
  t.early_stop_metric = parla::ValidationMetric::kBleu;
  t.patience = 2;
  TrainingScheduler s(t);
  TrainingState st;
  ValidationResult r;
  r.bleu = 20;
  st.step = 1;
  CHECK(s.record_validation(st, r).improved);
  r.bleu = 19;  // higher BLEU is better: not an improvement
  st.step = 2;
  auto v = s.record_validation(st, r);
  CHECK_FALSE(v.improved);
  CHECK_FALSE(v.patience_exhausted);
  st.step = 3;
  v = s.record_validation(st, r);
  CHECK(v.patience_exhausted);
  CHECK(st.best == 20);
  CHECK(st.best_step == 1);
  CHECK(st.last_valid_step == 3);
  auto done = s.finished_before_start(st, [] { return size_t{0}; });
  CHECK(done.reason == StopReason::kEarlyStopping);
  CHECK(done.detail.find("training.patience = 2") != std::string::npos);
}

TEST_CASE("pruning keeps the keep_last newest numbered checkpoints and nothing else is touched") {
  parla::testing::TempDir dir("scheduler-prune");
  for (const char* n : {"checkpoint_2.pt", "checkpoint_10.pt", "checkpoint_4.pt", "checkpoint_last.pt",
                        "checkpoint_best.pt"})
    dir.write(n, "x");
  TrainingConfig t;
  t.keep_last = 2;
  TrainingScheduler(t).prune_numbered_checkpoints(dir.path().string());
  CHECK_FALSE(fs::exists(dir.file("checkpoint_2.pt")));
  for (const char* n : {"checkpoint_4.pt", "checkpoint_10.pt", "checkpoint_last.pt", "checkpoint_best.pt"})
    CHECK(fs::exists(dir.file(n)));
}

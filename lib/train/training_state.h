#pragma once
// Everything besides weights and optimizer moments that a resumed run needs to continue exactly where the
// interrupted one stopped (Marian's training_state.h): the step, the data position (epoch and batches of that
// epoch's seeded plan already consumed), the early-stopping bookkeeping, the cumulative time, and the state of
// torch's CPU generator (dropout). Stored in checkpoints as JSON plus the generator's state tensor.
#include <cstdint>

#include <nlohmann/json.hpp>
#include <torch/serialize/archive.h>

namespace parla::train {

struct TrainingState {
  int64_t step = 0;            // optimizer updates taken
  int64_t epoch = 1;           // current epoch, 1-based
  int64_t batch_in_epoch = 0;  // batches of this epoch's plan consumed (by all ranks together)
  int64_t bad_steps = 0;       // consecutive updates skipped for a NaN/inf loss
  int64_t skipped_steps = 0;   // all updates skipped so far
  int64_t tokens = 0;          // source + target tokens trained on
  double elapsed = 0;          // seconds of training, summed over resumed runs
  bool has_best = false;
  double best = 0;             // best value of training.early_stop_metric
  int64_t best_step = 0;
  int64_t stale_validations = 0;     // validations since the best one
  int64_t last_valid_step = -1;
  nlohmann::json valid_history = nlohmann::json::array();  // every validation result

  nlohmann::json to_json() const;
  static TrainingState from_json(const nlohmann::json& j);

  // Writes/reads "training_state" (JSON) and "torch_rng" (the default CPU generator's state).
  void save(torch::serialize::OutputArchive& archive) const;
  // Throws DataError when the archive lacks the state (not a training checkpoint).
  void load(torch::serialize::InputArchive& archive, const std::string& path);
};

}  // namespace parla::train

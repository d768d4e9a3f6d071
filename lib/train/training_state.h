#pragma once
// Everything besides weights and optimizer moments that a resumed run needs to continue exactly where the
// interrupted one stopped (Marian's training_state.h): the step, the data position (epoch and batches of that
// epoch's seeded plan already consumed), the early-stopping bookkeeping, the cumulative time, and the state of
// torch's default generators (dropout): the CPU one, and the GPU's when training on CUDA. Stored in checkpoints
// as JSON plus the generators' state tensors.
#include <cstdint>
#include <string>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "models/tensor_archive.h"

namespace parla::train {

// The states of the default generators a run on `device` draws from: the CPU's always, the GPU's when `device`
// is CUDA (dropout on a GPU draws from the GPU's generator). Lets validation and resume leave the training's
// random stream exactly where it was.
struct GeneratorStates {
  torch::Tensor cpu, cuda;  // CPU byte tensors; cuda undefined on the CPU
  static GeneratorStates capture(const c10::Device& device);
  void restore(const c10::Device& device) const;
};

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

  // Writes/reads "training_state" (JSON), "torch_rng" (the default CPU generator's state) and, when `device` is
  // CUDA, "torch_cuda_rng" (that GPU's default generator), so that a resumed GPU run draws the same dropout masks.
  void save(models::TensorArchive& archive, const c10::Device& device) const;
  // Throws DataError when the archive lacks the state (not a training checkpoint). A CUDA run resumed from a
  // checkpoint without "torch_cuda_rng" (written on a CPU or before GPUs were supported) continues with a
  // warning: its dropout masks differ from the interrupted run's.
  void load(const models::TensorArchive& archive, const std::string& path, const c10::Device& device);
};

}  // namespace parla::train

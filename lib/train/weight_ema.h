#pragma once
// Exponential moving average of the weights (Polyak averaging; Marian's --exponential-smoothing, fairseq's
// --ema-decay): after every update, avg <- d_t avg + (1 - d_t) w for each parameter, with
// d_t = min(decay, (1 + t) / (10 + t)) at update t, so that the first updates are not averaged with the random
// initialisation at full weight (TensorFlow's ExponentialMovingAverage with num_updates). The average is a
// cheap, continuous form of checkpoint averaging: validation and early stopping can be done on it, and it is
// what checkpoint_best.pt and checkpoint_ema.pt hold when training.ema_decay is set.
//
// Parameters only: buffers (routing centroids, performer features, positions) are the model's own and are
// never averaged. The average lives beside the parameters (same device, fp32 like the master weights).
#include <cstdint>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "models/tensor_archive.h"

namespace parla::train {

class WeightEma {
 public:
  // Starts the average at the model's current parameters. decay in (0, 1).
  WeightEma(torch::nn::Module& model, double decay);

  // The decay used after update `step` (1-based): min(decay, (1 + step) / (10 + step)).
  double decay_at(int64_t step) const;
  // Folds the model's current parameters into the average; call once after each optimizer update.
  void update(int64_t step);
  // Exchanges the model's parameters with the average, in place; calling it again swaps them back.
  void swap();

  // Written as "weight_ema.<parameter name>" (one tensor per parameter); read back by load, which throws
  // DataError naming `path` when a tensor is missing or its shape differs.
  void save(models::TensorArchive& archive) const;
  // Returns false (the average untouched) when the archive has no weight average.
  bool load(const models::TensorArchive& archive, const std::string& path);

  // The average of parameter `name` (for tests).
  const torch::Tensor& average(const std::string& name) const;

 private:
  double decay_;
  std::vector<std::string> names_;
  std::vector<torch::Tensor> params_;   // the model's parameters (shared storage)
  std::vector<torch::Tensor> average_;  // their averages
};

// Runs `f` with the model's weights replaced by the average (ema may be null: `f` runs on the model as it is).
// The weights are swapped back even when `f` throws.
template <typename F>
auto with_averaged_weights(WeightEma* ema, F&& f) -> decltype(f()) {
  if (!ema) return f();
  struct SwapBack {
    WeightEma* e;
    ~SwapBack() { e->swap(); }
  };
  ema->swap();
  SwapBack back{ema};
  return f();
}

}  // namespace parla::train

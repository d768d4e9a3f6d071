#pragma once
// What a training run learns with (Marian's GraphGroup): the model, the AdamW optimizer over its parameters, the
// learning-rate schedule, the fp16 loss scaler, the weights' moving average and the precision of the forward pass,
// owned in one place and checkpointed together, so that a resumed run continues exactly. The update step
// (train/update_step.h) changes them; the trainer (train/trainer.h) keeps the loop, the files and the scheduler.
#include <memory>
#include <string>
#include <vector>

#include <c10/core/ScalarType.h>
#include <torch/torch.h>

#include "core/config.h"
#include "models/tensor_archive.h"
#include "train/dynamic_loss_scaler.h"
#include "train/lr_schedule.h"
#include "train/weight_ema.h"

namespace parla::train {

class Learner {
 public:
  // Puts `model` on `device` in training mode and makes its AdamW (training.lr, adam_beta1/2, adam_eps,
  // weight_decay), schedule and loss scaler. `precision`: training.precision resolved for the device
  // (runtime::resolve_precision); parameters and optimizer state stay fp32 whatever it is. The weight average is
  // made by load() or start_average().
  Learner(std::shared_ptr<torch::nn::Module> model, const TrainingConfig& config, torch::Device device,
          c10::ScalarType precision);

  // training.ema_decay > 0 and no average loaded: the average starts from the model's current weights (call
  // after the ranks' weights are made equal).
  void start_average();

  torch::nn::Module& model() const { return *model_; }
  torch::optim::AdamW& optimizer() { return *optimizer_; }
  const LrSchedule& schedule() const { return schedule_; }
  DynamicLossScaler& scaler() { return scaler_; }
  const DynamicLossScaler& scaler() const { return scaler_; }
  // Null without training.ema_decay.
  WeightEma* ema() const { return ema_.get(); }
  torch::Device device() const { return device_; }
  // Autocast dtype of the forward pass and the loss: Float, BFloat16 or Half.
  c10::ScalarType precision() const { return precision_; }
  // fp16 needs dynamic loss scaling (its gradients underflow otherwise); bf16 has fp32's exponent range and
  // does not (Kalamkar et al. 2019).
  bool loss_scaling() const { return precision_ == c10::ScalarType::Half; }

  // Update `step` (1-based) of an update whose gradients are final (summed, unscaled, clipped): AdamW over every
  // parameter at the schedule's learning rate for that step, in one multi-tensor pass
  // (train/multi_tensor_update.h), the gradients cleared, and the average's step.
  void step(int64_t step);

  // Drops every gradient (PyTorch's zero_grad(set_to_none=True)): no operator per parameter, and the next
  // backward pass writes fresh ones. Gradients accumulated over batches sum as they did onto zeros.
  void clear_gradients();

  // The learner's entries of a checkpoint: AdamW's state by parameter name (train/optimizer_state.h), the loss
  // scaler's under fp16, and the average's.
  void save(models::TensorArchive& archive) const;
  // Restores what save() wrote. DataError naming `path` when the archive holds no optimizer state (a model-only or
  // averaged checkpoint); without an average (written with ema_decay 0) the average starts from the weights, with a
  // warning; without a scaler's entry the scaler starts fresh.
  void load(const models::TensorArchive& archive, const std::string& path);

  // Runs `f` with the average's weights in the model (validation, checkpoint_ema.pt), or on the model as it is
  // without an average.
  template <typename F>
  auto with_averaged_weights(F&& f) -> decltype(f()) {
    return train::with_averaged_weights(ema_.get(), std::forward<F>(f));
  }

 private:
  // The optimizer's parameters by name (it holds the model's parameters in this order).
  std::vector<std::string> parameter_names() const;

  std::shared_ptr<torch::nn::Module> model_;
  double ema_decay_;
  torch::Device device_;
  c10::ScalarType precision_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  LrSchedule schedule_;
  DynamicLossScaler scaler_;
  std::unique_ptr<WeightEma> ema_;
};

}  // namespace parla::train

#include "train/learner.h"

#include <utility>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "train/multi_tensor_update.h"
#include "train/optimizer_state.h"

namespace parla::train {
namespace {

torch::optim::AdamWOptions adamw_options(const TrainingConfig& t) {
  torch::optim::AdamWOptions o(t.lr);
  o.betas({t.adam_beta1, t.adam_beta2}).eps(t.adam_eps).weight_decay(t.weight_decay);
  return o;
}

}  // namespace

Learner::Learner(std::shared_ptr<torch::nn::Module> model, const TrainingConfig& config, torch::Device device,
                 c10::ScalarType precision)
    : model_(std::move(model)),
      ema_decay_(config.ema_decay),
      device_(device),
      precision_(precision),
      schedule_(LrSchedule::from_config(config)),
      scaler_(LossScalerOptions::from_config(config)) {
  model_->to(device_);
  model_->train();
  optimizer_ = std::make_unique<torch::optim::AdamW>(model_->parameters(), adamw_options(config));
}

void Learner::start_average() {
  if (ema_decay_ > 0 && !ema_) ema_ = std::make_unique<WeightEma>(*model_, ema_decay_);
}

void Learner::step(int64_t step) {
  const double lr = schedule_(step);
  for (auto& g : optimizer_->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
  multi_tensor_adamw_step(*optimizer_);
  clear_gradients();
  if (ema_) ema_->update(step);
}

void Learner::clear_gradients() {
  for (auto& p : model_->parameters()) p.mutable_grad() = torch::Tensor();
}

std::vector<std::string> Learner::parameter_names() const {
  std::vector<std::string> names;
  for (const auto& p : model_->named_parameters()) names.push_back(p.key());
  return names;
}

void Learner::save(models::TensorArchive& archive) const {
  save_optimizer_state(*optimizer_, parameter_names(), archive);
  if (loss_scaling()) scaler_.save(archive);
  if (ema_) ema_->save(archive);
}

void Learner::load(const models::TensorArchive& archive, const std::string& path) {
  if (!load_optimizer_state(archive, *optimizer_, parameter_names()))
    throw DataError("'" + path + "' has no optimizer state (a model-only or averaged checkpoint?)");
  if (ema_decay_ > 0) {
    ema_ = std::make_unique<WeightEma>(*model_, ema_decay_);
    if (!ema_->load(archive, path))
      spdlog::warn("'{}' holds no weight average (it was written with training.ema_decay 0): the average starts "
                   "from its weights",
                   path);
  }
  scaler_.load(archive, path);  // absent (fp32/bf16 checkpoint): a fresh scaler
}

}  // namespace parla::train

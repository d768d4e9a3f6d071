#include "train/weight_ema.h"

#include <algorithm>

#include <torch/torch.h>

#include "core/error.h"
#include "train/multi_tensor_update.h"

namespace parla::train {

WeightEma::WeightEma(torch::nn::Module& model, double decay) : decay_(decay) {
  TORCH_CHECK(decay > 0 && decay < 1, "EMA decay must be in (0, 1), got ", decay);
  torch::NoGradGuard g;
  for (const auto& p : model.named_parameters()) {
    names_.push_back(p.key());
    params_.push_back(p.value());
    average_.push_back(p.value().detach().clone());
  }
}

double WeightEma::decay_at(int64_t step) const {
  return std::min(decay_, (1.0 + double(step)) / (10.0 + double(step)));
}

void WeightEma::update(int64_t step) {
  torch::NoGradGuard g;
  const double d = decay_at(step);
  average_into(average_, params_, d);  // read only, under no_grad: no detached copies needed
}

void WeightEma::swap() {
  torch::NoGradGuard g;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto held = params_[i].detach().clone();
    params_[i].detach().copy_(average_[i]);
    average_[i].copy_(held);
  }
}

void WeightEma::save(models::TensorArchive& archive) const {
  for (size_t i = 0; i < names_.size(); ++i) archive.write("weight_ema." + names_[i], average_[i]);
}

bool WeightEma::load(const models::TensorArchive& archive, const std::string& path) {
  if (archive.tensor_names("weight_ema.").empty()) return false;
  torch::NoGradGuard g;
  for (size_t i = 0; i < names_.size(); ++i) {
    torch::Tensor t;
    if (!archive.try_read("weight_ema." + names_[i], t))
      throw DataError("'" + path + "': the weight average (training.ema_decay) has no tensor '" + names_[i] + "'");
    if (t.sizes() != average_[i].sizes())
      throw DataError("'" + path + "': the weight average of '" + names_[i] + "' has another shape");
    average_[i].copy_(t);
  }
  return true;
}

const torch::Tensor& WeightEma::average(const std::string& name) const {
  auto it = std::find(names_.begin(), names_.end(), name);
  TORCH_CHECK(it != names_.end(), "no parameter '", name, "'");
  return average_[static_cast<size_t>(it - names_.begin())];
}

}  // namespace parla::train

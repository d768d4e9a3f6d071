#include "train/dynamic_loss_scaler.h"

#include <cmath>

#include <spdlog/fmt/fmt.h>  // spdlog's fmt (bundled or external), as the rest of parla gets it
#include <nlohmann/json.hpp>

#include "core/bounded_json.h"
#include "core/error.h"

namespace parla::train {

LossScalerOptions LossScalerOptions::from_config(const TrainingConfig& t) {
  return {t.loss_scale_init, t.loss_scale_window, t.min_loss_scale};
}

DynamicLossScaler::DynamicLossScaler(LossScalerOptions options) : options_(options), scale_(options.init_scale) {}

bool DynamicLossScaler::update(bool gradients_finite) {
  if (!gradients_finite) {
    ++overflows_;
    good_updates_ = 0;
    const double halved = scale_ / 2;
    if (halved < options_.min_scale)
      throw DataError(fmt::format(
          "the fp16 loss scale underflowed: gradients overflowed even at loss scale {:g}, and halving it would go "
          "below training.min_loss_scale ({:g}); training.precision 'fp16' cannot represent this model's "
          "gradients: use training.precision bf16 or fp32, or lower training.lr, and resume from the last checkpoint",
          scale_, options_.min_scale));
    scale_ = halved;
    return false;
  }
  if (++good_updates_ >= options_.window) {
    scale_ *= 2;
    good_updates_ = 0;
  }
  return true;
}

void DynamicLossScaler::save(models::TensorArchive& archive) const {
  nlohmann::json j = {{"scale", scale_}, {"good_updates", good_updates_}, {"overflows", overflows_}};
  archive.write("loss_scaler", j.dump());
}

bool DynamicLossScaler::load(const models::TensorArchive& archive, const std::string& path) {
  const std::string* v = archive.read_string("loss_scaler");
  if (!v) return false;
  try {
    auto j = parse_bounded_json(*v, JsonLimits{}, "loss_scaler");
    double scale = j.at("scale").get<double>();
    if (!(scale > 0) || !std::isfinite(scale)) throw std::runtime_error("scale " + j.at("scale").dump());
    scale_ = scale;
    good_updates_ = j.at("good_updates").get<int64_t>();
    overflows_ = j.at("overflows").get<int64_t>();
  } catch (const std::exception& e) {
    throw DataError("'" + path + "': corrupt loss_scaler entry (" + brief_reason(e) + ")");
  }
  return true;
}

}  // namespace parla::train

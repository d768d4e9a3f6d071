#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "core/config/training_config.h"
#include "core/error.h"

namespace parla::train {

LrSchedule::LrSchedule(LrScheduleKind kind, double lr, int64_t warmup_steps, double min_lr, int64_t max_steps)
    : kind_(kind), lr_(lr), min_lr_(min_lr), warmup_(warmup_steps), max_steps_(max_steps) {
  if (kind_ == LrScheduleKind::kCosine && max_steps_ <= warmup_)
    throw ConfigError("the cosine schedule needs training.max_steps (" + std::to_string(max_steps_) +
                      ") above training.warmup_steps (" + std::to_string(warmup_) + ")");
}

LrSchedule LrSchedule::from_config(const TrainingConfig& t) {
  return LrSchedule(t.schedule, t.lr, t.warmup_steps, t.min_lr, t.max_steps);
}

double LrSchedule::operator()(int64_t step) const {
  step = std::max<int64_t>(step, 1);
  if (warmup_ > 0 && step < warmup_) return lr_ * static_cast<double>(step) / static_cast<double>(warmup_);
  double lr = lr_;
  if (kind_ == LrScheduleKind::kInverseSqrt) {
    lr = lr_ * std::sqrt(static_cast<double>(std::max<int64_t>(warmup_, 1)) / static_cast<double>(step));
  } else if (kind_ == LrScheduleKind::kCosine) {
    double t = std::min(1.0, static_cast<double>(step - warmup_) / static_cast<double>(max_steps_ - warmup_));
    lr = min_lr_ + (lr_ - min_lr_) * 0.5 * (1.0 + std::cos(M_PI * t));
  }
  return std::max(lr, min_lr_);
}

}  // namespace parla::train

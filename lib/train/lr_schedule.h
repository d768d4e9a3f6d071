#pragma once
// Learning-rate schedules, as a function of the optimiser step (1-based). All start with a linear warm-up
// from 0 to the peak `lr` over `warmup_steps`, then:
//  - inverse_sqrt: lr * sqrt(warmup / step) (Vaswani et al. 2017, eq. 3, with the peak as the free parameter,
//    as in fairseq's inverse_sqrt: lr(step) = lr * min(step / warmup, sqrt(warmup / step)));
//  - constant: lr;
//  - cosine: min_lr + (lr - min_lr) * (1 + cos(pi * t)) / 2 with t = (step - warmup) / (max_steps - warmup)
//    (Loshchilov & Hutter 2017, SGDR, one cycle without restarts).
// Every schedule is floored at min_lr after warm-up. Stateless: a resumed run only needs the step.
#include <cstdint>

#include "core/config/training_config.h"

namespace parla::train {

class LrSchedule {
 public:
  // max_steps is needed by cosine only.
  LrSchedule(LrScheduleKind kind, double lr, int64_t warmup_steps, double min_lr = 0.0, int64_t max_steps = 0);
  static LrSchedule from_config(const TrainingConfig& t);

  double operator()(int64_t step) const;
  LrScheduleKind kind() const { return kind_; }

 private:
  LrScheduleKind kind_;
  double lr_, min_lr_;
  int64_t warmup_, max_steps_;
};

}  // namespace parla::train

#pragma once
// Why training stops (TrainResult::stop_reason), named as the log prints it.
#include "core/config/choice.h"

namespace parla::train {

// kNone: it trains on.
enum class StopReason { kNone, kMaxSteps, kMaxEpochs, kMaxTime, kEarlyStopping, kSignal };

}  // namespace parla::train

PARLA_CHOICES(parla::train::StopReason, {parla::train::StopReason::kNone, ""},
              {parla::train::StopReason::kMaxSteps, "max_steps"}, {parla::train::StopReason::kMaxEpochs, "max_epochs"},
              {parla::train::StopReason::kMaxTime, "max_time"},
              {parla::train::StopReason::kEarlyStopping, "early_stopping"},
              {parla::train::StopReason::kSignal, "signal"});

#pragma once
// The batcher's limits as the serve section's defaults give them, with the cost limits and preemption off: what
// the batching tests assume unless a test sets them.
#include "core/config/serve_config.h"
#include "serve/sentence_batcher.h"

namespace parla::testing {

inline serve::BatcherLimits plain_batcher_limits() {
  auto limits = serve::BatcherLimits::from_config(ServeConfig{});
  limits.max_queued_cost = 0;
  limits.preempt_ms = 0;
  limits.max_batch_cost = 0;
  return limits;
}

}  // namespace parla::testing

#include "nn/skipped_initialization.h"

#include <cmath>

#include <torch/torch.h>

namespace parla::nn {

namespace {
thread_local bool skipped = false;
}  // namespace

SkipInitialization::SkipInitialization() : previous_(skipped) { skipped = true; }
SkipInitialization::~SkipInitialization() { skipped = previous_; }

bool initialization_skipped() { return skipped; }

torch::Tensor initial_normal_table(int64_t rows, int64_t dim) {
  if (skipped) return torch::empty({rows, dim});
  return torch::randn({rows, dim}).mul_(std::pow(static_cast<double>(dim), -0.5));
}

}  // namespace parla::nn

#include "nn/skipped_initialization.h"

namespace parla::nn {

namespace {
thread_local bool skipped = false;
}  // namespace

SkipInitialization::SkipInitialization() : previous_(skipped) { skipped = true; }
SkipInitialization::~SkipInitialization() { skipped = previous_; }

bool initialization_skipped() { return skipped; }

}  // namespace parla::nn

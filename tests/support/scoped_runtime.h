#pragma once
// The process's applied runtime section (core/config/runtime_config.h: the kernel choices) changed for a scope and
// restored after, for tests that compare kernel paths.
#include <functional>

#include "core/config/runtime_config.h"

namespace parla::testing {

class ScopedRuntime {
 public:
  explicit ScopedRuntime(const std::function<void(RuntimeConfig&)>& change) : saved_(applied_runtime()) {
    RuntimeConfig rc = saved_;
    change(rc);
    set_applied_runtime(rc);
  }
  ~ScopedRuntime() { set_applied_runtime(saved_); }
  ScopedRuntime(const ScopedRuntime&) = delete;
  ScopedRuntime& operator=(const ScopedRuntime&) = delete;

 private:
  RuntimeConfig saved_;
};

}  // namespace parla::testing

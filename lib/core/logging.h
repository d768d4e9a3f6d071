#pragma once
// Logging goes to stderr through spdlog, so that stdout carries only results (translations, scores).
#include <string>

#include <spdlog/spdlog.h>

namespace parla::logging {

// level: trace, debug, info, warn, error, critical or off; quiet = only warnings and errors.
// Throws UsageError for an unknown level.
void setup(const std::string& program, const std::string& level, bool quiet);

}  // namespace parla::logging

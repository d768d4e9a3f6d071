#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "core/error.h"

namespace parla::logging {

void setup(const std::string& program, const std::string& level, bool quiet) {
  auto parsed = spdlog::level::from_str(level);
  // from_str maps anything unknown to "off"; a typo must not silence the program.
  if (parsed == spdlog::level::off && level != "off")
    throw UsageError("--log-level: unknown level '" + level +
                     "' (use trace, debug, info, warn, error, critical or off)");
  if (quiet && parsed < spdlog::level::warn) parsed = spdlog::level::warn;
  auto logger = spdlog::stderr_color_mt(program);
  logger->set_pattern("[%Y-%m-%d %H:%M:%S] [%n] [%^%l%$] %v");
  logger->set_level(parsed);
  spdlog::set_default_logger(logger);
}

}  // namespace parla::logging

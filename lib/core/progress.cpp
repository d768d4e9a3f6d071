#include "core/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <spdlog/spdlog.h>

namespace parla {

Progress::Progress(std::string what, std::string unit, uint64_t total, double interval_seconds)
    : what_(std::move(what)), unit_(std::move(unit)), total_(total), interval_(interval_seconds),
      start_(Clock::now()), last_log_(start_) {}

double Progress::elapsed_seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

double Progress::rate() const {
  double e = elapsed_seconds();
  return e > 0 ? static_cast<double>(done_) / e : 0.0;
}

std::string Progress::format_duration(double s) {
  char buf[64];
  if (!std::isfinite(s) || s < 0) return "?";
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  } else {
    int t = static_cast<int>(s);
    std::snprintf(buf, sizeof buf, "%dh%02dm%02ds", t / 3600, (t / 60) % 60, t % 60);
  }
  return buf;
}

std::string Progress::format_count(uint64_t count, const std::string& unit) {
  return std::to_string(count) + " " + unit + (count == 1 ? "" : "s");
}

std::string Progress::format_rate(uint64_t count, double seconds, const std::string& unit) {
  if (count < kMinUnitsForRate || !std::isfinite(seconds) || seconds < kMinSecondsForRate) return "";
  const double r = static_cast<double>(count) / seconds;
  // Slow work reads better as time per unit than as a rate with leading zeros.
  if (r < 1) return format_duration(seconds / static_cast<double>(count)) + "/" + unit;
  char buf[64];
  std::snprintf(buf, sizeof buf, r < 10 ? "%.1f" : "%.0f", r);
  return std::string(buf) + " " + unit + "s/s";
}

std::string Progress::format_done(uint64_t count, double seconds, const std::string& unit) {
  std::string rate = format_rate(count, seconds, unit);
  return format_count(count, unit) + " in " + format_duration(seconds) + (rate.empty() ? "" : " (" + rate + ")");
}

std::string Progress::format_progress(uint64_t done, uint64_t total, double seconds, const std::string& unit) {
  std::string line;
  if (total > 0) {
    char pct[32];
    std::snprintf(pct, sizeof pct, " (%.1f%%)", 100.0 * static_cast<double>(done) / static_cast<double>(total));
    line = std::to_string(done) + "/" + format_count(total, unit) + pct;
  } else {
    line = format_count(done, unit);
  }
  std::string rate = format_rate(done, seconds, unit);
  if (!rate.empty()) line += ", " + rate;
  line += ", elapsed " + format_duration(seconds);
  if (total > 0 && done > 0 && seconds > 0) {
    const double left = static_cast<double>(total - std::min(total, done)) * seconds / static_cast<double>(done);
    line += ", ETA " + format_duration(left);
  }
  return line;
}

void Progress::advance(uint64_t n) {
  done_ += n;
  auto now = Clock::now();
  if (std::chrono::duration<double>(now - last_log_).count() < interval_) return;
  last_log_ = now;
  spdlog::info("{}: {}", what_, format_progress(done_, total_, elapsed_seconds(), unit_));
}

void Progress::finish() {
  spdlog::info("{}: done, {}", what_, format_done(done_, elapsed_seconds(), unit_));
}

}  // namespace parla

#include "core/progress.h"

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

void Progress::advance(uint64_t n) {
  done_ += n;
  auto now = Clock::now();
  if (std::chrono::duration<double>(now - last_log_).count() < interval_) return;
  last_log_ = now;
  double r = rate();
  if (total_ > 0) {
    double eta = r > 0 ? static_cast<double>(total_ - std::min(total_, done_)) / r : NAN;
    spdlog::info("{}: {}/{} {} ({:.1f}%), {:.0f} {}/s, elapsed {}, ETA {}", what_, done_, total_, unit_,
                 100.0 * done_ / total_, r, unit_, format_duration(elapsed_seconds()), format_duration(eta));
  } else {
    spdlog::info("{}: {} {}, {:.0f} {}/s, elapsed {}", what_, done_, unit_, r, unit_,
                 format_duration(elapsed_seconds()));
  }
}

void Progress::finish() {
  spdlog::info("{}: done, {} {} in {} ({:.0f} {}/s)", what_, done_, unit_, format_duration(elapsed_seconds()),
               rate(), unit_);
}

}  // namespace parla

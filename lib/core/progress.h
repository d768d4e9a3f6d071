#pragma once
// Progress of long work (preprocessing, training, translation): rate and ETA, logged at most every
// `interval_seconds`, so a user watching stderr knows it is alive and how long it will take.
#include <chrono>
#include <cstdint>
#include <string>

namespace parla {

class Progress {
 public:
  // total = 0 when unknown (then no ETA). `unit` names what is counted ("lines", "sentences").
  Progress(std::string what, std::string unit, uint64_t total = 0, double interval_seconds = 10.0);
  // Adds n done units; logs a line when the interval has passed.
  void advance(uint64_t n = 1);
  // Logs the final line (count, elapsed, mean rate).
  void finish();

  uint64_t done() const { return done_; }
  double elapsed_seconds() const;
  double rate() const;  // units per second so far

  // "1h02m03s" / "4m05s" / "12.3s"
  static std::string format_duration(double seconds);

 private:
  using Clock = std::chrono::steady_clock;
  std::string what_, unit_;
  uint64_t total_, done_ = 0;
  double interval_;
  Clock::time_point start_, last_log_;
};

}  // namespace parla

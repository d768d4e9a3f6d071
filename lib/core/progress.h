#pragma once
// Progress of long work (preprocessing, training, translation): rate and ETA, logged at most every
// `interval_seconds`, so a user watching stderr knows it is alive and how long it will take.
//
// A rate is printed only where it means something: over at least kMinUnitsForRate units and kMinSecondsForRate
// seconds (one SentencePiece model in 4.2s is not "0 models/s"), and work slower than one unit a second is
// given as seconds per unit ("2.1s/model"). The text is built by the pure format_* functions, tested without a
// clock.
#include <chrono>
#include <cstdint>
#include <string>

namespace parla {

class Progress {
 public:
  // total = 0 when unknown (then no ETA). `unit` names ONE counted thing, in the singular ("pair", "model");
  // counts other than 1 append an "s".
  Progress(std::string what, std::string unit, uint64_t total = 0, double interval_seconds = 10.0);
  // Adds n done units; logs a line when the interval has passed.
  void advance(uint64_t n = 1);
  // Logs the final line (count, elapsed, mean rate where it means something).
  void finish();

  uint64_t done() const { return done_; }
  double elapsed_seconds() const;
  double rate() const;  // units per second so far

  // Fewer units or seconds than these give no rate: too few to average, or too short a time to measure.
  static constexpr uint64_t kMinUnitsForRate = 5;
  static constexpr double kMinSecondsForRate = 0.1;

  // "1h02m03s" / "4m05s" / "12.3s"
  static std::string format_duration(double seconds);
  // "1 model", "0 pairs", "2 pairs".
  static std::string format_count(uint64_t count, const std::string& unit);
  // "645 pairs/s", "4.2 pairs/s", "2.1s/model" (below one unit a second), "" where no rate means something
  // (see kMinUnitsForRate, kMinSecondsForRate).
  static std::string format_rate(uint64_t count, double seconds, const std::string& unit);
  // The final line after "WHAT: done, ": "1 model in 4.2s", "2000 pairs in 3.1s (645 pairs/s)".
  static std::string format_done(uint64_t count, double seconds, const std::string& unit);
  // A progress line after "WHAT: ": "1200/5000 pairs (24.0%), 120 pairs/s, elapsed 10.0s, ETA 31.7s", or
  // without a total "1200 pairs, 120 pairs/s, elapsed 10.0s".
  static std::string format_progress(uint64_t done, uint64_t total, double seconds, const std::string& unit);

 private:
  using Clock = std::chrono::steady_clock;
  std::string what_, unit_;
  uint64_t total_, done_ = 0;
  double interval_;
  Clock::time_point start_, last_log_;
};

}  // namespace parla

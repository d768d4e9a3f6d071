#pragma once
// What the micro-benchmarks share: the median wall time of repeated calls, and lists of sizes on the command line.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace parla::bench {

// Median seconds of `reps` calls of f, after one warm-up call.
template <class F>
double median_seconds(int reps, F&& f) {
  f();
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// "5,320" -> {5, 320}.
inline std::vector<int64_t> parse_counts(const std::string& text) {
  std::vector<int64_t> out;
  for (std::stringstream in(text); in.good();) {
    std::string v;
    std::getline(in, v, ',');
    out.push_back(std::stoll(v));
  }
  return out;
}

}  // namespace parla::bench

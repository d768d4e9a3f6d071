// Progress lines: counts, rates and ETAs as text, checked on the pure formatting functions (no clock).
#include <catch2/catch.hpp>

#include "core/progress.h"

using parla::Progress;

TEST_CASE("a count agrees in number with its unit") {
  CHECK(Progress::format_count(1, "model") == "1 model");
  CHECK(Progress::format_count(0, "pair") == "0 pairs");
  CHECK(Progress::format_count(2, "model") == "2 models");
  CHECK(Progress::format_count(1, "target token") == "1 target token");
}

TEST_CASE("no rate is given for a handful of units or a time too short to measure") {
  CHECK(Progress::format_rate(1, 4.2, "model") == "");  // parla-preprocess's "1 models in 4.2s (0 models/s)"
  CHECK(Progress::format_rate(2, 100, "model") == "");
  CHECK(Progress::format_rate(Progress::kMinUnitsForRate - 1, 10, "pair") == "");
  CHECK(Progress::format_rate(100000, 0.01, "pair") == "");
  CHECK(Progress::format_rate(100000, 0, "pair") == "");
  CHECK(Progress::format_rate(0, 10, "pair") == "");
  CHECK(Progress::format_rate(Progress::kMinUnitsForRate, 10, "pair") != "");
}

TEST_CASE("a rate is whole units per second when fast, one decimal below ten, seconds per unit below one") {
  CHECK(Progress::format_rate(2000, 3.1, "pair") == "645 pairs/s");
  CHECK(Progress::format_rate(84, 10, "pair") == "8.4 pairs/s");
  CHECK(Progress::format_rate(10, 10, "pair") == "1.0 pairs/s");
  // Never "0 models/s": slow work is time per unit.
  CHECK(Progress::format_rate(10, 42, "model") == "4.2s/model");
  CHECK(Progress::format_rate(6, 600, "model") == "1m40s/model");
}

TEST_CASE("the final line gives the count and time, and the rate only where it means something") {
  CHECK(Progress::format_done(1, 4.2, "model") == "1 model in 4.2s");
  CHECK(Progress::format_done(2, 8.0, "model") == "2 models in 8.0s");
  CHECK(Progress::format_done(2000, 3.1, "pair") == "2000 pairs in 3.1s (645 pairs/s)");
  CHECK(Progress::format_done(0, 0.0, "pair") == "0 pairs in 0.0s");
}

TEST_CASE("a progress line gives the share done, the rate, the elapsed time and the ETA") {
  CHECK(Progress::format_progress(1200, 5000, 10, "pair") ==
        "1200/5000 pairs (24.0%), 120 pairs/s, elapsed 10.0s, ETA 31.7s");
  CHECK(Progress::format_progress(1200, 0, 10, "pair") == "1200 pairs, 120 pairs/s, elapsed 10.0s");
  // Too few done for a rate, but the ETA (from the mean time per unit) still tells how long to wait.
  CHECK(Progress::format_progress(1, 3, 12, "model") == "1/3 models (33.3%), elapsed 12.0s, ETA 24.0s");
  CHECK(Progress::format_progress(0, 3, 12, "model") == "0/3 models (0.0%), elapsed 12.0s");
}

TEST_CASE("durations read as seconds, minutes or hours") {
  CHECK(Progress::format_duration(4.24) == "4.2s");
  CHECK(Progress::format_duration(245) == "4m05s");
  CHECK(Progress::format_duration(3723) == "1h02m03s");
  CHECK(Progress::format_duration(-1) == "?");
}

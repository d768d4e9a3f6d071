#include <catch2/catch.hpp>

#include "core/error.h"
#include "train/metrics_log.h"

TEST_CASE("a metrics record that cannot be written names the file and the system's reason") {
  parla::train::MetricsLog log("/dev/full", /*truncate=*/false);
  CHECK(log.enabled());
  CHECK_THROWS_WITH(log.write({{"type", "train"}, {"step", 1}}),
                    Catch::Contains("'/dev/full'") && Catch::Contains("No space left on device"));
  CHECK_FALSE(parla::train::MetricsLog().enabled());
}

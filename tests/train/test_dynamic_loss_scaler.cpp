#include <catch2/catch.hpp>

#include <vector>


#include "core/config.h"
#include "core/error.h"
#include "support/archives.h"
#include "train/dynamic_loss_scaler.h"

using parla::train::DynamicLossScaler;
using parla::train::LossScalerOptions;

namespace {

LossScalerOptions small(double init = 8, int64_t window = 3, double min_scale = 0.5) {
  return {init, window, min_scale};
}

// Saves `s` to bytes and reads it into a scaler built with `into`, as a
// checkpoint round trip does.
DynamicLossScaler round_trip(const DynamicLossScaler& s, LossScalerOptions into) {
  parla::models::TensorArchive out;
  s.save(out);
  auto in = parla::testing::reread(out);
  DynamicLossScaler r(into);
  REQUIRE(r.load(in, "mem.pt"));
  return r;
}

}  // namespace

TEST_CASE(
    "the loss scaler starts at fairseq's defaults: 2^16, a window of "
    "2000, a minimum of 1e-4",
    "[loss_scaler]") {
  auto o = LossScalerOptions::from_config(parla::TrainingConfig{});
  CHECK(o.init_scale == 65536.0);
  CHECK(o.window == 2000);
  CHECK(o.min_scale == 1e-4);
  CHECK(DynamicLossScaler(o).scale() == 65536.0);
}

TEST_CASE(
    "an overflow skips the update and halves the scale, and `window` finite "
    "updates in a row double it",
    "[loss_scaler]") {
  DynamicLossScaler s(small());
  // (gradients finite?, step taken?, scale after, overflows after), worked out
  // by hand from the rules (Micikevicius et al. 2018, Sec. 3.2): an overflow
  // also restarts the count towards the next doubling.
  struct Step {
    bool finite, taken;
    double scale;
    int64_t overflows;
  };
  const std::vector<Step> expected = {
      {true, true, 8, 0},   {true, true, 8, 0},   {true, true, 16, 0},  // third finite update in a row: x2
      {false, false, 8, 1},                                             // overflow: /2, skipped
      {true, true, 8, 1},   {true, true, 8, 1},                         // two finite ...
      {false, false, 4, 2},                                             // ... then an overflow restarts the count
      {true, true, 4, 2},   {true, true, 4, 2},   {true, true, 8, 2},   // a full window again: x2
      {false, false, 4, 3}, {false, false, 2, 4},                       // consecutive overflows keep halving
  };
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("update " << i);
    CHECK(s.update(expected[i].finite) == expected[i].taken);
    CHECK(s.scale() == expected[i].scale);
    CHECK(s.overflows() == expected[i].overflows);
  }
}

TEST_CASE(
    "an overflow that would take the scale below the minimum stops with "
    "a message naming the way out",
    "[loss_scaler]") {
  DynamicLossScaler s(small(/*init=*/2, /*window=*/3, /*min_scale=*/0.5));
  CHECK_FALSE(s.update(false));
  CHECK(s.scale() == 1);
  CHECK_FALSE(s.update(false));
  CHECK(s.scale() == 0.5);  // exactly the minimum is still allowed
  try {
    s.update(false);
    FAIL("no error when the scale fell below the minimum");
  } catch (const parla::DataError& e) {
    std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("loss scale underflowed"));
    CHECK_THAT(m, Catch::Contains("training.precision"));
    CHECK_THAT(m, Catch::Contains("training.min_loss_scale"));
    CHECK_THAT(m, Catch::Contains("bf16"));
    CHECK_THAT(m, Catch::Contains("fp32"));
    CHECK_THAT(m, Catch::Contains("training.lr"));
  }
  CHECK(s.scale() == 0.5);  // the error leaves the last usable scale
}

TEST_CASE(
    "the loss scaler's state survives a checkpoint round trip and "
    "continues identically",
    "[loss_scaler]") {
  DynamicLossScaler a(small(/*init=*/64, /*window=*/4));
  for (bool finite : {true, false, true, true}) a.update(finite);  // scale 32, 2 of 4 good updates, 1 overflow
  REQUIRE(a.scale() == 32);
  // Restored into a scaler built with another initial scale: the checkpoint's
  // state wins.
  DynamicLossScaler b = round_trip(a, small(/*init=*/1024, /*window=*/4));
  CHECK(b.scale() == 32);
  CHECK(b.good_updates() == 2);
  CHECK(b.overflows() == 1);
  for (bool finite : {true, true, false, true}) {
    CHECK(a.update(finite) == b.update(finite));
    CHECK(a.scale() == b.scale());  // 32, 64 (window reached), 32, 32
  }
  CHECK(b.scale() == 32);
}

TEST_CASE(
    "a checkpoint without loss-scaler state leaves a fresh scaler, a "
    "corrupt one is an error naming the file",
    "[loss_scaler]") {
  parla::models::TensorArchive out;
  out.write("something_else", std::string("1"));
  auto in = parla::testing::reread(out);
  DynamicLossScaler s(small(/*init=*/16));
  CHECK_FALSE(s.load(in, "old.pt"));
  CHECK(s.scale() == 16);
  CHECK(s.overflows() == 0);

  parla::models::TensorArchive bad;
  bad.write("loss_scaler", std::string(R"({"scale": -1, "good_updates": 0, "overflows": 0})"));
  auto bad_in = parla::testing::reread(bad);
  CHECK_THROWS_WITH(s.load(bad_in, "bad.pt"), Catch::Contains("bad.pt") && Catch::Contains("loss_scaler"));
}

TEST_CASE("a minimum loss scale above the initial one is a config error naming both keys", "[loss_scaler]") {
  parla::config::ConfigBuilder b;
  b.merge(nlohmann::json::parse(R"({"training": {"loss_scale_init": 0.5, "min_loss_scale": 1}})"), "test");
  CHECK_THROWS_AS(b.build(), parla::ConfigError);
  CHECK_THROWS_WITH(b.build(),
                    Catch::Contains("training.min_loss_scale") && Catch::Contains("training.loss_scale_init"));
  b.merge(nlohmann::json::parse(R"({"training": {"min_loss_scale": 0.5}})"), "test");
  CHECK(b.build().training.min_loss_scale == 0.5);  // equal is allowed: the first overflow is the one that stops
}

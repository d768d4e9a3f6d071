// Every executable that reads the shared config rejects bad config the same way: the key and the file in the
// message, exit code 2, before any work starts. Checked through the executables, as a user meets them.
#include <catch2/catch.hpp>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "support/run.h"
#include "support/temp_dir.h"

using Catch::Matchers::Contains;
using parla::testing::run;

namespace {
const char* kConfigApps[] = {"parla-preprocess", "parla-train", "parla-translate"};
}

TEST_CASE("the effective config from --dump-config has the defaults, file values and overrides") {
  parla::testing::TempDir dir("flags");
  auto cfg = dir.write("c.json", R"({"runtime": {"threads": 1}, "decoding": {"beam_size": 7}})");
  for (const char* app : kConfigApps) {
    INFO(app);
    auto r = run(app, {"--config", cfg, "--set", "training.lr=0.002", "--dump-config"});
    REQUIRE(r.exit_code == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["runtime"]["threads"] == 1);
    CHECK(j["decoding"]["beam_size"] == 7);
    CHECK(j["training"]["lr"] == 0.002);
    CHECK(j["data"]["clean"].contains("max_tokens"));
  }
}

TEST_CASE("an unknown config key exits 2 naming the key, the file and a suggestion") {
  parla::testing::TempDir dir("flags");
  auto cfg = dir.write("typo.json", R"({"decoding": {"beam_sise": 4}})");
  for (const char* app : kConfigApps) {
    INFO(app);
    auto r = run(app, {"--config", cfg, "--dump-config"});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("decoding.beam_sise"));
    CHECK_THAT(r.err, Contains(cfg));
    CHECK_THAT(r.err, Contains("did you mean 'decoding.beam_size'"));
    CHECK(r.out.empty());
  }
}

TEST_CASE("a wrong type or out-of-range override exits 2 naming the key") {
  for (const char* app : kConfigApps) {
    INFO(app);
    auto wrong_type = run(app, {"--set", "runtime.threads=many", "--dump-config"});
    CHECK(wrong_type.exit_code == 2);
    CHECK_THAT(wrong_type.err, Contains("runtime.threads"));
    auto out_of_range = run(app, {"--set", "training.lr=0", "--dump-config"});
    CHECK(out_of_range.exit_code == 2);
    CHECK_THAT(out_of_range.err, Contains("training.lr"));
    CHECK_THAT(out_of_range.err, Contains("out of range"));
  }
}

TEST_CASE("--help documents the common options and exits 0, an unknown flag or log level exits 2") {
  for (const char* app : {"parla-preprocess", "parla-train", "parla-translate", "parla-score-bleu"}) {
    INFO(app);
    auto help = run(app, {"--help"});
    CHECK(help.exit_code == 0);
    CHECK_THAT(help.out, Contains("--log-level"));
    CHECK_THAT(help.out, Contains("--quiet"));
    CHECK(run(app, {"--no-such-flag"}).exit_code == 2);
    auto bad_level = run(app, {"--log-level", "loud"});
    CHECK(bad_level.exit_code == 2);
    CHECK_THAT(bad_level.err, Contains("loud"));
  }
  for (const char* app : kConfigApps) {
    INFO(app);
    auto help = run(app, {"--help"});
    CHECK_THAT(help.out, Contains("--config"));
    CHECK_THAT(help.out, Contains("--set"));
    CHECK_THAT(help.out, Contains("--dump-config"));
  }
}

TEST_CASE("named flags map onto their config keys and override the file") {
  parla::testing::TempDir dir("flags");
  auto cfg = dir.write("c.json", R"({"decoding": {"beam_size": 7}, "training": {"lr": 0.005}})");
  auto translate = run("parla-translate", {"--config", cfg, "--beam-size", "3", "--normalize", "1.5", "--alignment",
                                           "hard", "--seed", "9", "--dump-config"});
  REQUIRE(translate.exit_code == 0);
  auto t = nlohmann::json::parse(translate.out);
  CHECK(t["decoding"]["beam_size"] == 3);
  CHECK(t["decoding"]["length_penalty"] == 1.5);
  CHECK(t["decoding"]["alignment"] == "hard");
  CHECK(t["runtime"]["seed"] == 9);
  auto train = run("parla-train", {"--config", cfg, "--lr", "0.001", "--max-steps", "12", "--dump-config"});
  REQUIRE(train.exit_code == 0);
  auto j = nlohmann::json::parse(train.out);
  CHECK(j["training"]["lr"] == 0.001);
  CHECK(j["training"]["max_steps"] == 12);
  // An absent flag leaves the file's value.
  CHECK(j["decoding"]["beam_size"] == 7);
  auto bad = run("parla-translate", {"--beam-size", "0", "--dump-config"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("--beam-size"));
}

TEST_CASE("every shipped recipe in configs/ is a valid config for every executable") {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(PARLA_SOURCE_DIR) + "/configs")) {
    if (entry.path().extension() != ".json") continue;
    ++checked;
    for (const char* app : kConfigApps) {
      INFO(entry.path().filename().string() << " in " << app);
      auto r = run(app, {"--config", entry.path().string(), "--dump-config"});
      CHECK(r.exit_code == 0);
      CHECK(r.err == "");
    }
  }
  CHECK(checked >= 8);  // quickstart, europarl, rnn, bert, and the Multi30k transformer, rnn, bert, bert-init
}

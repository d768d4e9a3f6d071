// Every executable that reads the shared config rejects bad config the same way: the key and the file in the
// message, exit code 2, before any work starts. Checked through the executables, as a user meets them.
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "support/run.h"
#include "support/temp_dir.h"

using Catch::Matchers::Contains;
using parla::testing::run;

namespace {
const char* kConfigApps[] = {"parla-preprocess", "parla-train", "parla-translate", "parla-serve"};
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

TEST_CASE("every executable documents the common options in --help and exits 0, an unknown flag or log level exits 2") {
  for (const char* app : {"parla-preprocess", "parla-train", "parla-translate", "parla-score-bleu", "parla-serve"}) {
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

namespace {
// One flag spelling and the config value it must produce, read back with --dump-config. `also` names another key
// the arguments set (n_best needs a larger beam_size).
struct Spelling {
  std::vector<std::string> args;
  std::string section, key;
  nlohmann::json expected;
  std::string also = "";
};

// Checks every spelling in as few runs as possible (an app's start costs ~0.5 s): each run takes at most one
// spelling per key, so no value can hide another.
void check_spellings(const char* app, const std::vector<Spelling>& spellings) {
  std::vector<std::vector<const Spelling*>> runs;
  std::vector<std::set<std::string>> keys_of_run;
  for (const auto& s : spellings) {
    std::set<std::string> keys{s.section + "." + s.key};
    if (!s.also.empty()) keys.insert(s.also);
    size_t r = 0;
    auto clashes = [&](size_t i) {
      for (const auto& k : keys)
        if (keys_of_run[i].count(k)) return true;
      return false;
    };
    while (r < runs.size() && clashes(r)) ++r;
    if (r == runs.size()) {
      runs.emplace_back();
      keys_of_run.emplace_back();
    }
    runs[r].push_back(&s);
    keys_of_run[r].insert(keys.begin(), keys.end());
  }
  for (const auto& one_run : runs) {
    std::vector<std::string> args;
    for (const auto* s : one_run) args.insert(args.end(), s->args.begin(), s->args.end());
    args.push_back("--dump-config");
    auto r = run(app, args);
    INFO(app << " with " << args.size() << " arguments: " << r.err);
    REQUIRE(r.exit_code == 0);
    auto j = nlohmann::json::parse(r.out);
    for (const auto* s : one_run) {
      INFO(app << " " << s->args[0]);
      CHECK(j[s->section][s->key] == s->expected);
    }
  }
}
}  // namespace

TEST_CASE("every flag spelling and alias the apps had before the schema declared them still works") {
  check_spellings("parla-translate",
                  {{{"-b", "3"}, "decoding", "beam_size", 3},
                   {{"--beam-size", "4"}, "decoding", "beam_size", 4},
                   {{"-b", "4", "-n", "2"}, "decoding", "n_best", 2, "decoding.beam_size"},
                   {{"-b", "4", "--n-best", "3"}, "decoding", "n_best", 3, "decoding.beam_size"},
                   {{"--normalize", "0.1"}, "decoding", "length_penalty", 0.1},
                   {{"--length-penalty", "0.2"}, "decoding", "length_penalty", 0.2},
                   {{"--lenpen", "0.3"}, "decoding", "length_penalty", 0.3},
                   {{"--max-length-factor", "1.5"}, "decoding", "max_length_factor", 1.5},
                   {{"--max-length-offset", "7"}, "decoding", "max_length_offset", 7},
                   {{"--min-length", "2"}, "decoding", "min_length", 2},
                   {{"--max-input-length", "50"}, "decoding", "max_input_length", 50},
                   {{"--batch-size", "9"}, "decoding", "batch_size", 9},
                   {{"--mini-batch", "10"}, "decoding", "batch_size", 10},
                   {{"--batch-tokens", "900"}, "decoding", "batch_tokens", 900},
                   {{"--max-tokens", "901"}, "decoding", "batch_tokens", 901},
                   {{"--maxi-batch", "4"}, "decoding", "maxi_batch", 4},
                   {{"--line-buffered"}, "decoding", "line_buffered", true},
                   {{"--alignment", "hard"}, "decoding", "alignment", "hard"},
                   {{"--sampling"}, "decoding", "sampling", true},
                   {{"--temperature", "0.7"}, "decoding", "temperature", 0.7},
                   {{"--top-k", "5"}, "decoding", "top_k", 5},
                   {{"--precision", "bf16"}, "decoding", "precision", "bf16"},
                   {{"--seed", "11"}, "runtime", "seed", 11},
                   {{"--threads", "1"}, "runtime", "threads", 1},
                   {{"--cpu-threads", "2"}, "runtime", "threads", 2},
                   {{"--device", "auto"}, "runtime", "device", "auto"}});
  check_spellings("parla-train",
                  {{{"--data", "d"}, "data", "dir", "d"},
                   {{"-o", "r1"}, "training", "save_dir", "r1"},
                   {{"--save-dir", "r2"}, "training", "save_dir", "r2"},
                   {{"--max-steps", "12"}, "training", "max_steps", 12},
                   {{"--max-update", "13"}, "training", "max_steps", 13},
                   {{"--max-epochs", "2"}, "training", "max_epochs", 2},
                   {{"--max-epoch", "3"}, "training", "max_epochs", 3},
                   {{"--max-time", "1.5"}, "training", "max_time", 1.5},
                   {{"--lr", "0.001"}, "training", "lr", 0.001},
                   {{"--batch-tokens", "800"}, "training", "batch_tokens", 800},
                   {{"--max-tokens", "801"}, "training", "batch_tokens", 801},
                   {{"--update-freq", "2"}, "training", "update_freq", 2},
                   {{"--init-encoder-from", "b.pt"}, "training", "init_encoder_from", "b.pt"},
                   {{"--precision", "bf16"}, "training", "precision", "bf16"},
                   {{"--seed", "5"}, "runtime", "seed", 5},
                   {{"--threads", "1"}, "runtime", "threads", 1},
                   {{"--device", "cpu"}, "runtime", "device", "cpu"}});
  check_spellings("parla-preprocess",
                  {{{"--prefix", "corpus"}, "data", "train_prefix", "corpus"},
                   {{"-s", "de"}, "data", "src_lang", "de"},
                   {{"--src-lang", "fr"}, "data", "src_lang", "fr"},
                   {{"--source-lang", "it"}, "data", "src_lang", "it"},
                   {{"-t", "en"}, "data", "tgt_lang", "en"},
                   {{"--tgt-lang", "es"}, "data", "tgt_lang", "es"},
                   {{"--target-lang", "pt"}, "data", "tgt_lang", "pt"},
                   {{"--train-src", "a.de"}, "data", "train_src", "a.de"},
                   {{"--train-tgt", "a.en"}, "data", "train_tgt", "a.en"},
                   {{"--valid-prefix", "v"}, "data", "valid_prefix", "v"},
                   {{"--test-prefix", "t"}, "data", "test_prefix", "t"},
                   {{"-o", "o1"}, "data", "dir", "o1"},
                   {{"--output", "o2"}, "data", "dir", "o2"},
                   {{"--destdir", "o3"}, "data", "dir", "o3"},
                   {{"--vocab-size", "900"}, "vocab", "vocab_size", 900},
                   {{"--model-type", "bpe"}, "vocab", "model_type", "bpe"}});
}

TEST_CASE("the help of each app lists every flag of the keys it exposes, with the key it sets") {
  const std::pair<const char*, std::vector<std::string>> apps[] = {
      {"parla-translate", {"decoding", "runtime"}},
      {"parla-serve", {"serve", "runtime"}},
      {"parla-train", {"training", "runtime"}},
      {"parla-preprocess", {"data", "vocab"}}};
  for (const auto& [app, sections] : apps) {
    auto help = run(app, {"--help"});
    REQUIRE(help.exit_code == 0);
    for (const auto& section : sections) {
      for (const auto& k : parla::config::section_keys(section)) {
        if (k.flags.empty()) continue;
        INFO(app << ": " << section << "." << k.key);
        CHECK_THAT(help.out, Contains(section + "." + k.key));
        std::string last = k.flags.substr(k.flags.rfind(',') + 1);
        CHECK_THAT(help.out, Contains(last));
      }
    }
  }
}

TEST_CASE("a config dumped into a full disk (--dump-config) exits 1 naming standard output and the reason") {
  for (const char* app : kConfigApps) {
    INFO(app);
    auto r = run("/bin/bash", {"-c", std::string(PARLA_BIN_DIR) + "/" + app + " --dump-config > /dev/full"});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("cannot write standard output: No space left on device"));
  }
}

TEST_CASE("what an executable prints to a closed or full standard output is an error, not a silent success") {
  const std::string bin = std::string(PARLA_BIN_DIR) + "/";
  for (const char* app : kConfigApps) {
    INFO(app);
    auto closed = run("/bin/bash", {"-c", bin + app + " --dump-config >&-"});
    CHECK(closed.exit_code == 1);
    CHECK_THAT(closed.err, Contains("cannot write standard output: Bad file descriptor"));
  }
  for (const char* app : {"parla-preprocess", "parla-train", "parla-translate", "parla-score-bleu", "parla-serve"}) {
    INFO(app);
    auto help = run("/bin/bash", {"-c", bin + app + " --help > /dev/full"});
    CHECK(help.exit_code == 1);
    CHECK_THAT(help.err, Contains("cannot write standard output: No space left on device"));
    auto version = run("/bin/bash", {"-c", bin + app + " --version >&-"});
    CHECK(version.exit_code == 1);
    CHECK_THAT(version.err, Contains("cannot write standard output: Bad file descriptor"));
    // The same commands with a standard output that takes the text succeed.
    CHECK(run(app, {"--help"}).exit_code == 0);
  }
}

// tools/sweep.py (issue 19's sweep helper) run as a user would: a training grid on the toy copy task, checked
// against the runs' own config.json and metrics.jsonl read here; a decoding sweep on the shared Multi30k model
// checked against parla-translate + parla-score-bleu run directly.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "support/run.h"
#include "support/temp_dir.h"
#include "toy_dataset.h"

namespace sweep_tool_tests {

namespace fs = std::filesystem;

bool have_python() { return std::system("python3 -c pass >/dev/null 2>&1") == 0; }
std::string sweep() { return std::string(PARLA_SOURCE_DIR) + "/tools/sweep.py"; }

// Lines of `text` that are table rows (start with "| " and are not the header or the rule).
std::vector<std::string> table_rows(const std::string& text) {
  std::vector<std::string> rows;
  std::istringstream in(text);
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.rfind("|", 0) != 0) continue;
    if (header) {
      header = false;
      continue;
    }
    if (line.rfind("|---", 0) == 0) continue;
    rows.push_back(line);
  }
  return rows;
}

std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> out;
  std::istringstream in(row.substr(1));
  std::string c;
  while (std::getline(in, c, '|')) {
    auto b = c.find_first_not_of(' '), e = c.find_last_not_of(' ');
    out.push_back(b == std::string::npos ? "" : c.substr(b, e - b + 1));
  }
  return out;
}

TEST_CASE("sweep train runs every grid point once with its settings, keeps finished runs, and tables the best") {
  if (!have_python()) {
    WARN("python3 not found; skipping");
    return;
  }
  auto data = parla::test::toy_dataset("sweep");
  auto cfg = parla::test::toy_config(data, "sweep-base");
  cfg.training.max_steps = 6;
  cfg.training.valid_every = 3;
  parla::testing::TempDir tmp("sweep");
  auto config = tmp.write("base.json", parla::config::to_json(cfg).dump(2));
  const std::string out = tmp.file("runs");
  std::vector<std::string> args = {"python3", sweep(), "train", "--config", config, "--data", data, "--out", out,
                                   "--grid", "model.dropout=0.1,0.3", "--grid", "training.lr=0.001,0.003",
                                   "--bin", PARLA_BIN_DIR};
  auto r = parla::testing::run("/usr/bin/env", args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  // Every grid point trained with exactly its settings (config.json is the run's own record of its config).
  double best_loss = std::numeric_limits<double>::infinity();
  std::string best_run;
  int64_t best_step = -1;
  for (std::string dropout : {"0.1", "0.3"})
    for (std::string lr : {"0.001", "0.003"}) {
      const std::string name = "dropout-" + dropout + "_lr-" + lr;
      REQUIRE(fs::exists(out + "/" + name + "/checkpoint_last.pt"));
      auto run_cfg = nlohmann::json::parse(std::ifstream(out + "/" + name + "/config.json"));
      CHECK(run_cfg["model"]["dropout"].get<double>() == Approx(std::stod(dropout)));
      CHECK(run_cfg["training"]["lr"].get<double>() == Approx(std::stod(lr)));
      std::ifstream metrics(out + "/" + name + "/metrics.jsonl");
      std::string line;
      while (std::getline(metrics, line)) {
        auto rec = nlohmann::json::parse(line);
        if (rec.value("type", "") == "valid" && rec["loss"].get<double>() < best_loss) {
          best_loss = rec["loss"].get<double>();
          best_run = name;
          best_step = rec["step"].get<int64_t>();
        }
      }
    }
  auto rows = table_rows(r.out);
  REQUIRE(rows.size() == 4);
  auto first = cells(rows.front());
  CHECK(first.front() == best_run);  // sorted best first; the metric is loss (no BLEU validation)
  CHECK(std::stod(first[first.size() - 2]) == Approx(best_loss).margin(1e-4));
  CHECK(first.back() == std::to_string(best_step));
  CHECK(first[first.size() - 3] == "6");  // updates

  // The same call again trains nothing: every run finished.
  auto stamp = fs::last_write_time(out + "/" + best_run + "/checkpoint_last.pt");
  auto again = parla::testing::run("/usr/bin/env", args);
  REQUIRE(again.exit_code == 0);
  CHECK(fs::last_write_time(out + "/" + best_run + "/checkpoint_last.pt") == stamp);
  size_t kept = 0;
  for (size_t at = again.err.find("finished earlier"); at != std::string::npos;
       at = again.err.find("finished earlier", at + 1))
    ++kept;
  CHECK(kept == 4);
  CHECK(table_rows(again.out).size() == 4);
}

TEST_CASE("sweep: a malformed grid or seed list is exit 2 naming it, and a folder without runs is exit 1") {
  if (!have_python()) {
    WARN("python3 not found; skipping");
    return;
  }
  parla::testing::TempDir tmp("sweep-bad");
  auto r = parla::testing::run("/usr/bin/env", {"python3", sweep(), "train", "--config", "c.json", "--data", "d",
                                                "--out", tmp.file("o"), "--grid", "dropout=0.1"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--grid 'dropout=0.1'") != std::string::npos);
  r = parla::testing::run("/usr/bin/env", {"python3", sweep(), "train", "--config", "c.json", "--data", "d", "--out",
                                           tmp.file("o"), "--grid", "model.dropout=0.1", "--seeds", "1,x"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--seeds") != std::string::npos);
  r = parla::testing::run("/usr/bin/env", {"python3", sweep(), "table", tmp.path().string()});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("no run folder") != std::string::npos);
}

TEST_CASE("sweep decode scores every beam and length penalty on validation as parla-score-bleu does, and names "
          "the best") {
  const std::string model = std::string(PARLA_SHARED_DIR) + "/models/multi30k-en-de-small/average.pt";
  const std::string data = std::string(PARLA_SHARED_DIR) + "/data/multi30k";
  if (!have_python() || !fs::exists(model) || !fs::exists(data + "/val.en")) {
    WARN("python3, ../shared/models/multi30k-en-de-small or ../shared/data/multi30k missing; skipping");
    return;
  }
  parla::testing::TempDir tmp("sweep-decode");
  // The first 40 validation pairs keep it quick.
  auto head = [&](const std::string& from, const std::string& name) {
    std::ifstream in(from);
    std::ostringstream text;
    std::string line;
    for (int i = 0; i < 40 && std::getline(in, line); ++i) text << line << "\n";
    return tmp.write(name, text.str());
  };
  auto src = head(data + "/val.en", "val.en"), ref = head(data + "/val.de", "val.de");
  auto r = parla::testing::run("/usr/bin/env", {"python3", sweep(), "decode", "--model", model, "--src", src, "--ref",
                                                ref, "--beam", "1,3", "--lenpen", "0,1.0", "--out", tmp.file("d"),
                                                "--bin", PARLA_BIN_DIR});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto rows = table_rows(r.out);
  REQUIRE(rows.size() == 4);
  double best = -1;
  for (const auto& row : rows) {
    auto c = cells(row);
    REQUIRE(c.size() == 3);
    // Reference: the same setting translated and scored directly.
    auto hyp = tmp.file("ref-" + c[0] + "-" + c[1] + ".hyp");
    auto t = parla::testing::run("parla-translate", {"-m", model, "-i", src, "-o", hyp, "--beam-size", c[0],
                                                     "--length-penalty", c[1]});
    REQUIRE(t.exit_code == 0);
    auto s = parla::testing::run("parla-score-bleu", {ref, "-i", hyp, "-m", "bleu", "-b"});
    REQUIRE(s.exit_code == 0);
    CHECK(std::stod(c[2]) == Approx(std::stod(s.out)).margin(0.006));
    best = std::max(best, std::stod(c[2]));
  }
  char want[32];
  std::snprintf(want, sizeof want, "(BLEU %.2f)", best);
  CHECK(r.out.find(want) != std::string::npos);
}

}  // namespace sweep_tool_tests

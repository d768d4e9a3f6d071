// parla-preprocess's held-out sets taken from the corpus by position (`--held-out last`) or by document
// (`--held-out documents --docids FILE`), as Europarl's neighbouring lines and days repeat each other.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/files.h"
#include "support/run.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using nlohmann::json;
using parla::testing::read_file;
using parla::testing::read_lines;
using parla::testing::run;
using parla::testing::TempDir;

namespace held_out_test {


// A corpus of numbered lines with a document id per line: 4 days of 30 lines.
void write_days(const TempDir& dir) {
  std::ofstream de(dir.file("c.de")), en(dir.file("c.en")), ids(dir.file("c.docids"));
  const char* words[] = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"};
  for (int day = 0; day < 4; ++day)
    for (int k = 0; k < 30; ++k) {
      int i = day * 30 + k;
      de << "satz " << i << " " << words[i % 8] << " " << words[(i / 8) % 8] << "\n";
      en << "sentence " << i << " " << words[i % 8] << " " << words[(i / 8) % 8] << "\n";
      ids << "ep-01-0" << (day < 2 ? 7 : 9) << "-0" << (day % 2 + 1) << "\n";
    }
}

std::vector<int> numbers(const std::string& path) {
  std::vector<int> out;
  for (const auto& line : read_lines(path)) out.push_back(std::stoi(line.substr(line.find(' ') + 1)));
  return out;
}


TEST_CASE("preprocess --held-out documents: exactly the pairs of the named documents are held out") {
  TempDir dir("held-out-docs");
  write_days(dir);
  auto r = run("parla-preprocess", {"--prefix", dir.file("c"), "--src-lang", "de", "--tgt-lang", "en", "-o",
                                    dir.file("ds"), "--held-out", "documents", "--docids", dir.file("c.docids"),
                                    "--valid-documents", "ep-01-07-02", "--test-documents", "ep-01-09",
                                    "--vocab-size", "300"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  // Reference, from the definition: lines 30-59 are ep-01-07-02, lines 60-119 ep-01-09-*.
  std::vector<int> valid, test;
  for (int i = 30; i < 60; ++i) valid.push_back(i);
  for (int i = 60; i < 120; ++i) test.push_back(i);
  CHECK(numbers(dir.file("ds/valid.en")) == valid);
  CHECK(numbers(dir.file("ds/test.de")) == test);
  auto stats = json::parse(read_file(dir.file("ds/stats.json")));
  CHECK(stats["splits"]["train"]["pairs"] == 30);
}

TEST_CASE("preprocess --held-out last: the corpus's last pairs are the test set and those before them the validation set") {
  TempDir dir("held-out-last");
  write_days(dir);
  auto r = run("parla-preprocess", {"--prefix", dir.file("c"), "--src-lang", "de", "--tgt-lang", "en", "-o",
                                    dir.file("ds"), "--held-out", "last", "--valid-size", "5", "--test-size", "7",
                                    "--vocab-size", "300"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(numbers(dir.file("ds/valid.en")) == std::vector<int>{108, 109, 110, 111, 112});
  CHECK(numbers(dir.file("ds/test.en")) == std::vector<int>{113, 114, 115, 116, 117, 118, 119});
}

TEST_CASE("preprocess --held-out documents: a missing key, a prefix that matches nothing or a short id file is refused") {
  TempDir dir("held-out-errors");
  write_days(dir);
  std::vector<std::string> base = {"--prefix", dir.file("c"), "--src-lang", "de", "--tgt-lang", "en", "-o",
                                   dir.file("ds"), "--vocab-size", "300"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run("parla-preprocess", args);
  };
  auto no_ids = with({"--held-out", "documents", "--test-documents", "ep-01-09"});
  CHECK(no_ids.exit_code == 2);
  CHECK_THAT(no_ids.err, Contains("data.docids"));
  auto stray = with({"--docids", dir.file("c.docids")});
  CHECK(stray.exit_code == 2);
  CHECK_THAT(stray.err, Contains("--held-out documents"));
  auto nothing = with({"--held-out", "documents", "--docids", dir.file("c.docids"), "--test-documents", "ep-02"});
  CHECK(nothing.exit_code == 1);
  CHECK_THAT(nothing.err, Contains("'ep-02' matches no document id"));
  auto lines = read_lines(dir.file("c.docids"));
  {
    std::ofstream shorter(dir.file("short.docids"));
    for (size_t k = 0; k + 1 < lines.size(); ++k) shorter << lines[k] << "\n";
  }
  auto short_ids = with({"--held-out", "documents", "--docids", dir.file("short.docids"), "--test-documents", "ep-01-09"});
  CHECK(short_ids.exit_code == 1);
  CHECK_THAT(short_ids.err, Contains("has 119 lines, the corpus"));
  CHECK_FALSE(fs::exists(dir.file("ds")));
}

}  // namespace held_out_test

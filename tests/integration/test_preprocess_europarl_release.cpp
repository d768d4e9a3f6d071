// parla-preprocess --europarl-release: the source release in, a dataset (and, with --aligned-out, the aligned
// text) out; the aligned pairs measured against the release days of ../shared, whose lines are already aligned.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "support/europarl_reference.h"
#include "support/files.h"
#include "support/run.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using nlohmann::json;
using parla::testing::run;
using parla::testing::TempDir;

namespace preprocess_release_test {

using parla::testing::read_file;
using parla::testing::read_lines;

// The release before sentence splitting and alignment, written as a day file.
void write_joined(const std::string& from, const std::string& to) {
  std::ofstream out(to, std::ios::binary);
  for (const auto& line : parla::testing::join_paragraphs(read_lines(from))) out << line << '\n';
}

TEST_CASE("preprocess --europarl-release: the joined release days are aligned, cleaned and binarized, and the pairs match the reference") {
  std::string base = std::string(PARLA_SHARED_DIR) + "/data/europarl-raw-release-en-fr/";
  if (!fs::exists(base + "en/ep-00-01-17.txt")) {
    WARN("skipped: " << base << " is absent");
    return;
  }
  TempDir dir("release");
  std::map<std::pair<std::string, std::string>, int> gold;
  size_t gold_pairs = 0;
  for (std::string day : {"ep-00-01-17", "ep-00-01-21"}) {
    for (std::string lang : {"en", "fr"}) {
      fs::create_directories(dir.file("rel/" + lang));
      write_joined(base + lang + "/" + day + ".txt", dir.file("rel/" + lang + "/" + day + ".txt"));
    }
    auto en = read_lines(base + "en/" + day + ".txt"), fr = read_lines(base + "fr/" + day + ".txt");
    REQUIRE(en.size() == fr.size());
    for (const auto& pair : parla::testing::reference_pairs(en, fr)) {
      ++gold[pair];
      ++gold_pairs;
    }
  }
  auto r = run("parla-preprocess", {"--europarl-release", dir.file("rel"), "--src-lang", "en", "--tgt-lang", "fr",
                                    "-o", dir.file("ds"), "--aligned-out", dir.file("aligned/pairs"),
                                    "--vocab-size", "1000", "--valid-size", "20", "--test-size", "20"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto stats = json::parse(read_file(dir.file("ds/stats.json")));
  auto en = read_lines(dir.file("aligned/pairs.en")), fr = read_lines(dir.file("aligned/pairs.fr"));
  REQUIRE(en.size() == fr.size());
  CHECK(stats["europarl_release"]["pairs"] == en.size());
  CHECK(stats["europarl_release"]["days"]["aligned"] == 2);
  CHECK(stats["inputs"]["train"]["pairs_read"] == en.size());
  auto meta = json::parse(read_file(dir.file("ds/meta.json")));
  CHECK(meta["config"]["data"]["europarl_release"] == dir.file("rel"));
  CHECK_THAT(r.err, Contains("europarl align: done"));
  size_t correct = 0;
  for (size_t k = 0; k < en.size(); ++k) {
    auto it = gold.find({en[k], fr[k]});
    if (it != gold.end() && it->second > 0) {
      --it->second;
      ++correct;
    }
  }
  double precision = double(correct) / en.size(), recall = double(correct) / gold_pairs;
  INFO("precision " << precision << ", recall " << recall);
  CHECK(precision >= 0.95);
  CHECK(recall >= 0.95);

  // An --aligned-out that cannot be written (its folder is a file): exit 1 naming the key, no dataset, no half.
  std::ofstream(dir.file("blocker")) << "a file, not a folder\n";
  auto blocked = run("parla-preprocess", {"--europarl-release", dir.file("rel"), "--src-lang", "en", "--tgt-lang",
                                          "fr", "-o", dir.file("ds2"), "--aligned-out", dir.file("blocker/pairs"),
                                          "--vocab-size", "1000"});
  CHECK(blocked.exit_code == 1);
  CHECK_THAT(blocked.err, Contains("data.aligned_out"));
  CHECK_FALSE(fs::exists(dir.file("ds2")));
  for (const auto& e : fs::directory_iterator(dir.path()))
    CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
}

TEST_CASE("preprocess --europarl-release: with a corpus prefix, or --aligned-out alone, is a usage error (exit 2)") {
  TempDir dir("release-usage");
  fs::create_directories(dir.file("rel/en"));
  auto both = run("parla-preprocess", {"--europarl-release", dir.file("rel"), "--prefix", dir.file("c"),
                                       "--src-lang", "en", "--tgt-lang", "fr", "-o", dir.file("ds")});
  CHECK(both.exit_code == 2);
  CHECK_THAT(both.err, Contains("data.europarl_release"));
  auto alone = run("parla-preprocess", {"--prefix", dir.file("c"), "--aligned-out", dir.file("a"), "--src-lang",
                                        "en", "--tgt-lang", "fr", "-o", dir.file("ds")});
  CHECK(alone.exit_code == 2);
  CHECK_THAT(alone.err, Contains("--aligned-out"));
  auto no_lang = run("parla-preprocess", {"--europarl-release", dir.file("rel"), "-o", dir.file("ds")});
  CHECK(no_lang.exit_code == 2);
  CHECK_THAT(no_lang.err, Contains("--src-lang"));
  auto missing = run("parla-preprocess", {"--europarl-release", dir.file("rel"), "--src-lang", "en", "--tgt-lang",
                                          "fr", "-o", dir.file("ds")});
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.err, Contains(dir.file("rel")));
  CHECK_FALSE(fs::exists(dir.file("ds")));
  for (const auto& e : fs::directory_iterator(dir.path()))
    CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
}

}  // namespace preprocess_release_test

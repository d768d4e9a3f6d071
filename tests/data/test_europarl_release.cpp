// The source release folder: which days are paired, how their files are read, what comes out and in which order,
// and every bad input of issue 15 reported, counted or refused with the folder named.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "data/europarl_release.h"
#include "support/files.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using parla::data::align_europarl_release;
using parla::data::EuroparlReleaseOptions;
using parla::testing::TempDir;

namespace europarl_release_test {

using parla::testing::read_file;

void put(const TempDir& dir, const std::string& name, const std::string& content) {
  fs::create_directories(fs::path(dir.file(name)).parent_path());
  dir.write(name, content);
}

// A day of two speeches whose sentences are told apart by `tag`, in "English" and "French" (lengths alike).
std::string day_text(const std::string& tag, bool french) {
  std::string a = french ? "Monsieur le Pr\xC3\xA9sident " : "Mister President ";
  return "<CHAPTER ID=1>\n<SPEAKER ID=1 NAME=\"A\">\n" + a + tag + " opens the sitting.\n<P>\n" +
         (french ? "La s\xC3\xA9" "ance est ouverte " : "The sitting is now open ") + tag +
         ".\n<SPEAKER ID=2 NAME=\"B\">\n" + (french ? "Je remercie " : "I thank ") + tag + " very much.\n";
}

EuroparlReleaseOptions options(const TempDir& dir, int threads = 1) {
  return {dir.path().string(), "en", "fr", threads};
}


TEST_CASE("release: days of both languages are aligned in day order, days of one language are skipped, counted") {
  TempDir dir("release-days");
  put(dir, "rel/en/ep-00-01-18.txt", day_text("eighteen", false));
  put(dir, "rel/fr/ep-00-01-18.txt", day_text("eighteen", true));
  put(dir, "rel/en/ep-00-01-17.txt", day_text("seventeen", false));
  put(dir, "rel/fr/ep-00-01-17.txt", day_text("seventeen", true));
  put(dir, "rel/en/ep-00-01-19.txt", day_text("nineteen", false));  // English only
  put(dir, "rel/fr/README", "not a day file");
  auto r = align_europarl_release({dir.file("rel"), "en", "fr", 1}, dir.file("out.en"), dir.file("out.fr"));
  CHECK(r.pairs == 6);
  std::string en = read_file(dir.file("out.en")), fr = read_file(dir.file("out.fr"));
  CHECK(en.find("seventeen opens") < en.find("eighteen opens"));  // day order, not directory order
  CHECK(en.find("nineteen") == std::string::npos);
  CHECK_THAT(fr, Contains("La s\xC3\xA9" "ance est ouverte eighteen."));
  CHECK(r.stats["days"]["paired"] == 2);
  CHECK(r.stats["days"]["only_en"] == 1);
  CHECK(r.stats["days"]["only_fr"] == 0);
  CHECK(r.stats["other_files"] == 1);
  CHECK(r.stats["beads"]["1-1"] == 6);
  CHECK(r.stats["pairs"] == 6);
}

TEST_CASE("release: the output does not depend on the number of threads") {
  TempDir dir("release-threads");
  for (int d = 1; d <= 28; ++d) {
    char name[32];
    std::snprintf(name, sizeof name, "ep-00-02-%02d.txt", d);
    put(dir, std::string("en/") + name, day_text("day" + std::to_string(d), false));
    put(dir, std::string("fr/") + name, day_text("day" + std::to_string(d), true));
  }
  align_europarl_release(options(dir, 1), dir.file("one.en"), dir.file("one.fr"));
  align_europarl_release(options(dir, 3), dir.file("three.en"), dir.file("three.fr"));
  CHECK(read_file(dir.file("one.en")) == read_file(dir.file("three.en")));
  CHECK(read_file(dir.file("one.fr")) == read_file(dir.file("three.fr")));
  CHECK(read_file(dir.file("one.en")).find("day28 very much") != std::string::npos);
}

TEST_CASE("release: a day in parts is read in part order, and a day file beside its own parts wins, counted") {
  TempDir dir("release-parts");
  put(dir, "txt/en/ep-00-03-01.txt", day_text("march", false));
  std::string fr = day_text("march", true);
  size_t cut = fr.find("<SPEAKER ID=2");
  put(dir, "txt/fr/ep-00-03-01-002.txt", fr.substr(cut));  // the release's txt/LANG layout, parts out of order
  put(dir, "txt/fr/ep-00-03-01-001.txt", fr.substr(0, cut));
  put(dir, "txt/en/ep-00-03-02.txt", day_text("second", false));
  put(dir, "txt/en/ep-00-03-02-001.txt", "<CHAPTER ID=1>\nA stray copy that must not be read.\n");
  put(dir, "txt/fr/ep-00-03-02.txt", day_text("second", true));
  auto r = align_europarl_release(options(dir), dir.file("o.en"), dir.file("o.fr"));
  CHECK(r.pairs == 6);
  CHECK(read_file(dir.file("o.fr")).find("Je remercie march") != std::string::npos);
  CHECK(read_file(dir.file("o.en")).find("stray") == std::string::npos);
  CHECK(r.stats["days"]["in_parts"] == 1);
  CHECK(r.stats["days"]["day_file_beside_parts"] == 1);
}

TEST_CASE("release: latin-1 lines are converted, a BOM and CR LF ends dropped, an empty file's day skipped") {
  TempDir dir("release-encoding");
  std::string fr = day_text("latin", true);
  // The same text in latin-1: every UTF-8 e acute (C3 A9) becomes the single byte E9.
  std::string latin1;
  for (size_t i = 0; i < fr.size(); ++i)
    if (fr.compare(i, 2, "\xC3\xA9") == 0) {
      latin1 += '\xE9';
      ++i;
    } else {
      latin1 += fr[i];
    }
  std::string en = day_text("latin", false), crlf = "\xEF\xBB\xBF";
  for (char c : en) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  put(dir, "en/ep-01-01-01.txt", crlf);
  put(dir, "fr/ep-01-01-01.txt", latin1);
  put(dir, "en/ep-01-01-02.txt", day_text("empty", false));
  put(dir, "fr/ep-01-01-02.txt", "");
  auto r = align_europarl_release(options(dir), dir.file("o.en"), dir.file("o.fr"));
  CHECK(r.pairs == 3);
  CHECK_THAT(read_file(dir.file("o.fr")), Contains("La s\xC3\xA9" "ance est ouverte latin."));
  CHECK(read_file(dir.file("o.en")).find('\r') == std::string::npos);
  CHECK(read_file(dir.file("o.en")).rfind("Mister", 0) == 0);  // no BOM in front
  CHECK(r.stats["files"]["fr"]["latin1_lines"] == 2);
  CHECK(r.stats["files"]["en"]["crlf_lines"] == 7);
  CHECK(r.stats["files"]["en"]["byte_order_mark"] == true);
  CHECK(r.stats["days"]["empty"] == 1);
  CHECK(r.stats["days"]["aligned"] == 1);
}

TEST_CASE("release: a missing language folder, no day files, no common day or no pair at all is a data error naming the folder") {
  TempDir dir("release-errors");
  auto fails = [&](const std::string& what) {
    try {
      align_europarl_release(options(dir), dir.file("o.en"), dir.file("o.fr"));
    } catch (const parla::DataError& e) {
      CHECK_THAT(e.what(), Contains(what));
      CHECK(e.exit_code() == 1);
      return;
    }
    FAIL("no DataError");
  };
  put(dir, "en/ep-00-01-01.txt", day_text("a", false));
  fails("has no folder 'fr'");
  fs::create_directories(dir.file("fr"));
  put(dir, "fr/notes.txt", "x");
  fails("no day files (ep-YY-MM-DD.txt) in '" + dir.file("fr") + "'");
  put(dir, "fr/ep-00-01-02.txt", day_text("a", true));
  fails("have no day in common");
  put(dir, "fr/ep-00-01-01.txt", "");
  fails("no sentence pairs could be aligned");
}

}  // namespace europarl_release_test

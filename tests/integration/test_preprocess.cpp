// parla-preprocess end to end, as a user runs it: a corpus in, a dataset directory out; and every bad input
// of issue 3 giving a clear message, the right exit code, and nothing half-written.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "data/token_dataset.h"
#include "support/run.h"
#include "support/temp_dir.h"
#include "text/line_reader.h"
#include "text/sentencepiece_vocab.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using nlohmann::json;
using parla::testing::run;
using parla::testing::TempDir;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> lines_of(const fs::path& p) {
  parla::text::LineReader r(p.string());
  std::vector<std::string> out;
  std::string line;
  while (r.next(line)) out.push_back(line);
  return out;
}

void write_gz(const std::string& path, const std::string& content) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, content.data(), static_cast<unsigned>(content.size()));
  gzclose(f);
}

// A hand-made corpus with a known number of pairs for each drop reason; `clean` is what must survive, in order.
struct Corpus {
  std::string src, tgt;
  std::vector<std::pair<std::string, std::string>> clean;
  std::map<std::string, int> dropped;
};

Corpus make_corpus() {
  Corpus c;
  const char* de[] = {"das", "haus", "ist", "gro\xC3\x9F", "und", "alt", "wir", "haben", "heute", "eine", "sitzung"};
  const char* en[] = {"the", "house", "is", "big", "and", "old", "we", "have", "today", "a", "session"};
  auto add = [&](const std::string& s, const std::string& t) {
    c.src += s + "\n";
    c.tgt += t + "\n";
  };
  uint32_t x = 99;
  for (int i = 0; i < 300; ++i) {
    std::string s, t;
    int n = 3 + i % 8;
    for (int k = 0; k < n; ++k) {
      x = x * 1664525u + 1013904223u;
      s += (k ? " " : "") + std::string(de[(x >> 16) % 11]);
      t += (k ? " " : "") + std::string(en[(x >> 16) % 11]);
    }
    s += " " + std::to_string(i);  // makes every planted pair unique
    t += " " + std::to_string(i);
    if (i % 50 == 1) {
      add("  " + s + "\t", t + "  ");  // cleaned, kept
    } else {
      add(s, t);
    }
    c.clean.push_back({s, t});
    if (i % 60 == 2) {
      add("<SPEAKER ID=" + std::to_string(i) + " NAME=\"X\">", "<SPEAKER ID=" + std::to_string(i) + " NAME=\"X\">");
      add("<P>", "<P>");
      c.dropped["markup"] += 2;
      add(s, t);  // exact duplicate
      add(s + " ", t);  // duplicate after cleaning
      c.dropped["duplicate"] += 2;
    }
  }
  add("", "empty source");
  add("leere Ziel", "  ");
  c.dropped["empty"] += 2;
  add("ung\xFC" "ltig", "invalid latin-1");
  c.dropped["invalid_utf8"] += 1;
  std::string long_side;
  for (int k = 0; k < 300; ++k) long_side += "wort ";
  add(long_side, "word");
  c.dropped["too_long"] += 1;
  add("eins", "one two three four five six seven eight nine ten");
  c.dropped["length_ratio"] += 1;
  return c;
}

// Writes the corpus as PREFIX.de / PREFIX.en (gzipped when asked).
std::string write_corpus(const TempDir& dir, const Corpus& c, bool gz, const std::string& name = "corpus.de-en") {
  std::string prefix = dir.file(name);
  if (gz) {
    write_gz(prefix + ".de.gz", c.src);
    write_gz(prefix + ".en.gz", c.tgt);
  } else {
    std::ofstream(prefix + ".de", std::ios::binary) << c.src;
    std::ofstream(prefix + ".en", std::ios::binary) << c.tgt;
  }
  return prefix;
}

std::vector<std::string> small_run_args() {
  return {"--vocab-size", "300", "--set", "data.valid_size=20", "--set", "data.test_size=10", "--set",
          "runtime.threads=2", "-q"};
}

parla::testing::RunResult preprocess(std::vector<std::string> args, bool small = true) {
  if (small)
    for (auto& a : small_run_args()) args.push_back(a);
  return run("parla-preprocess", args);
}

bool leftovers(const fs::path& parent) {
  for (const auto& e : fs::directory_iterator(parent))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("preprocess: cleans, splits, encodes and reads back, every drop reason is counted") {
  TempDir dir("preprocess");
  Corpus c = make_corpus();
  std::string prefix = write_corpus(dir, c, false);
  std::string out = dir.file("ds");
  auto r = preprocess({"--prefix", prefix, "--src-lang", "de", "--tgt-lang", "en", "-o", out});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);

  auto stats = json::parse(slurp(out + "/stats.json"));
  auto& train_in = stats["inputs"]["train"];
  for (auto& [reason, n] : c.dropped) CHECK(train_in["dropped"][reason] == n);
  CHECK(train_in["pairs_kept"] == c.clean.size());
  CHECK(train_in["dropped"]["identical"] == 0);

  auto info = parla::data::read_dataset_info(out);
  CHECK(info.joint);
  auto vocab = parla::text::SentencePieceVocab::load(info.src_spm_path);
  CHECK(vocab.size() == info.src_vocab_size);
  CHECK(info.meta["config"]["data"]["train_prefix"] == prefix);
  CHECK(info.meta["inputs"]["train"]["src"]["bytes"] == c.src.size());

  // Every clean pair lands in exactly one split, in corpus order, and decodes back to its cleaned text.
  std::vector<std::pair<std::string, std::string>> decoded;
  std::map<std::string, size_t> sizes;
  for (std::string split : {"train", "valid", "test"}) {
    auto ps = parla::data::open_split(info, split);
    sizes[split] = ps.src.size();
    for (size_t i = 0; i < ps.src.size(); ++i) {
      auto s = ps.src.get(i), t = ps.tgt.get(i);
      decoded.push_back({vocab.decode(std::vector<int>(s.begin(), s.end())),
                         vocab.decode(std::vector<int>(t.begin(), t.end()))});
    }
    if (split != "train") {
      // The raw text kept for BLEU is the same as the binarized split.
      auto src_text = lines_of(out + "/" + split + ".de"), tgt_text = lines_of(out + "/" + split + ".en");
      REQUIRE(src_text.size() == ps.src.size());
      for (size_t i = 0; i < src_text.size(); ++i) {
        auto ids = ps.src.get(i);
        CHECK(vocab.decode(std::vector<int>(ids.begin(), ids.end())) == src_text[i]);
      }
      CHECK(tgt_text.size() == ps.tgt.size());
    }
  }
  CHECK(sizes["valid"] == 20);
  CHECK(sizes["test"] == 10);
  CHECK(sizes["train"] == c.clean.size() - 30);
  std::sort(decoded.begin(), decoded.end());
  auto expected = c.clean;
  std::sort(expected.begin(), expected.end());
  CHECK(decoded == expected);
  CHECK(stats["splits"]["valid"]["pairs"] == 20);
  CHECK_FALSE(fs::exists(out + "/corpus.clean.de"));
  CHECK_FALSE(leftovers(dir.path()));
}

TEST_CASE("preprocess: gzip input gives the same dataset as plain input") {
  TempDir dir("preprocess");
  Corpus c = make_corpus();
  std::string plain = write_corpus(dir, c, false, "plain"), gz = write_corpus(dir, c, true, "gz");
  // fairseq's spellings of the language flags work too.
  REQUIRE(preprocess({"--prefix", plain, "--source-lang", "de", "--target-lang", "en", "-o", dir.file("a")}).exit_code == 0);
  REQUIRE(preprocess({"--prefix", gz, "-s", "de", "-t", "en", "-o", dir.file("b")}).exit_code == 0);
  for (std::string f : {"train.de.bin", "train.en.idx", "valid.en.bin", "test.de", "spm.model", "stats.json"})
    CHECK(slurp(dir.file("a/" + f)) == slurp(dir.file("b/" + f)));
}

TEST_CASE("preprocess: the same seed and input give byte-identical output, another seed another split") {
  TempDir dir("preprocess");
  Corpus c = make_corpus();
  std::string prefix = write_corpus(dir, c, false);
  std::vector<std::string> base = {"--prefix", prefix, "--src-lang", "de", "--tgt-lang", "en"};
  auto with = [&](std::vector<std::string> extra) {
    auto a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  REQUIRE(preprocess(with({"-o", dir.file("a")})).exit_code == 0);
  REQUIRE(preprocess(with({"-o", dir.file("b"), "--set", "runtime.threads=1"})).exit_code == 0);
  REQUIRE(preprocess(with({"-o", dir.file("c"), "--set", "runtime.seed=7"})).exit_code == 0);
  size_t compared = 0;
  for (const auto& e : fs::directory_iterator(dir.file("a"))) {
    std::string name = e.path().filename().string();
    if (name == "meta.json") continue;  // records the output directory itself
    INFO(name);
    CHECK(slurp(e.path()) == slurp(dir.file("b/" + name)));
    ++compared;
  }
  CHECK(compared >= 14);
  CHECK(slurp(dir.file("a/valid.de")) != slurp(dir.file("c/valid.de")));
}

TEST_CASE("preprocess: separate validation and test files are used as given, and separate vocabularies work") {
  TempDir dir("preprocess");
  Corpus c = make_corpus();
  std::string prefix = write_corpus(dir, c, false);
  std::string long_line;
  for (int k = 0; k < 300; ++k) long_line += "lang ";
  dir.write("dev.de", "das haus\n<P>\n" + long_line + "\n");
  dir.write("dev.en", "the house\n<P>\nlong\n");
  dir.write("tst.de", "wir haben\n");
  dir.write("tst.en", "we have\n");
  auto r = preprocess({"--prefix", prefix, "--src-lang", "de", "--tgt-lang", "en", "--valid-prefix", dir.file("dev"),
                       "--test-prefix", dir.file("tst"), "--set", "vocab.joint=false", "-o", dir.file("ds")});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto info = parla::data::read_dataset_info(dir.file("ds"));
  CHECK_FALSE(info.joint);
  CHECK(info.src_spm_path != info.tgt_spm_path);
  CHECK(parla::data::open_split(info, "train").src.size() == c.clean.size());
  // Markup is removed from held-out sets, but a long sentence is kept: its reference must stay complete.
  CHECK(lines_of(dir.file("ds/valid.de")) == std::vector<std::string>{"das haus", long_line.substr(0, long_line.size() - 1)});
  CHECK(lines_of(dir.file("ds/test.en")) == std::vector<std::string>{"we have"});
  auto tgt_vocab = parla::text::SentencePieceVocab::load(info.tgt_spm_path);
  auto t = parla::data::open_split(info, "test").tgt.get(0);
  CHECK(tgt_vocab.decode(std::vector<int>(t.begin(), t.end())) == "we have");
}

TEST_CASE("preprocess: progress lines count in the right number and give rates only where they mean something") {
  TempDir dir("preprocess");
  std::string prefix = write_corpus(dir, make_corpus(), false);
  auto args = small_run_args();
  args.pop_back();  // not -q: the info lines are under test
  REQUIRE(args.size() == 8);
  for (std::string a : {"--prefix", prefix.c_str(), "--src-lang", "de", "--tgt-lang", "en", "-o"}) args.push_back(a);
  args.push_back(dir.file("ds"));
  auto r = run("parla-preprocess", args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  // One joint SentencePiece model: "1 model", and no rate from one unit (the user saw "1 models ... (0 models/s)").
  CHECK_THAT(r.err, Contains("vocab: done, 1 model in"));
  CHECK_THAT(r.err, !Contains("models/s") && !Contains("1 models") && !Contains(" 0 pairs/s"));
  CHECK_THAT(r.err, Contains("encode: done, ") && Contains(" pairs in "));
}

TEST_CASE("preprocess: unequal line counts name both files and both counts, exit 1, nothing written") {
  TempDir dir("preprocess");
  dir.write("c.de", "a\nb\nc\n");
  dir.write("c.en", "a\nb\n");
  auto r = preprocess({"--prefix", dir.file("c"), "--src-lang", "de", "--tgt-lang", "en", "-o", dir.file("out")});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains(dir.file("c.de")) && Contains("3 lines") && Contains(dir.file("c.en")) &&
                        Contains("2 lines"));
  CHECK_FALSE(fs::exists(dir.file("out")));
  CHECK_FALSE(leftovers(dir.path()));
}

TEST_CASE("preprocess: a missing input file is named, exit 1") {
  TempDir dir("preprocess");
  dir.write("c.de", "a\n");
  auto r = preprocess({"--prefix", dir.file("c"), "--src-lang", "de", "--tgt-lang", "en", "-o", dir.file("out")});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains(dir.file("c.en")));
  r = preprocess({"--train-src", dir.file("c.de"), "--train-tgt", dir.file("nope.en"), "-o", dir.file("out")});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains(dir.file("nope.en")));
  CHECK_FALSE(fs::exists(dir.file("out")));
}

TEST_CASE("preprocess: an existing output directory is refused unless --force, which replaces it") {
  TempDir dir("preprocess");
  Corpus c = make_corpus();
  std::string prefix = write_corpus(dir, c, false);
  fs::create_directories(dir.file("out"));
  dir.write("out/old-file", "x");
  std::vector<std::string> args = {"--prefix", prefix, "--src-lang", "de", "--tgt-lang", "en", "-o", dir.file("out")};
  auto r = preprocess(args);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains(dir.file("out")) && Contains("--force"));
  CHECK(fs::exists(dir.file("out/old-file")));
  args.push_back("--force");
  r = preprocess(args);
  CHECK(r.exit_code == 0);
  CHECK_FALSE(fs::exists(dir.file("out/old-file")));
  CHECK(fs::exists(dir.file("out/meta.json")));
  CHECK_FALSE(leftovers(dir.path()));
}

TEST_CASE("preprocess: an unwritable output location is a clear error, exit 1") {
  TempDir dir("preprocess");
  Corpus c = make_corpus();
  std::string prefix = write_corpus(dir, c, false);
  dir.write("a-file", "x");
  auto r = preprocess({"--prefix", prefix, "--src-lang", "de", "--tgt-lang", "en", "-o", dir.file("a-file/ds")});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("a-file"));
}

TEST_CASE("preprocess: a write failure (file size limit, as on a full disk) stops with a message, nothing left") {
  TempDir dir("preprocess");
  Corpus c = make_corpus();
  std::string prefix = write_corpus(dir, c, false);
  // RLIMIT_FSIZE makes write() fail (EFBIG) past 2 KB, like ENOSPC on a full disk; SIGXFSZ is ignored so the
  // failure reaches the program as an error return, which it must report.
  std::string exe = std::string(PARLA_BIN_DIR) + "/parla-preprocess";
  std::vector<std::string> args = {"-c", "trap '' XFSZ; ulimit -f 4; exec \"$0\" \"$@\"", exe, "--prefix", prefix,
                                   "--src-lang", "de", "--tgt-lang", "en", "-o", dir.file("out")};
  auto r = run("/bin/sh", args);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("cannot write") && Contains(dir.file("out")));
  CHECK_FALSE(fs::exists(dir.file("out")));
  CHECK_FALSE(leftovers(dir.path()));
}

TEST_CASE("preprocess: usage errors exit 2 before any work") {
  TempDir dir("preprocess");
  dir.write("c.de", "a\n");
  dir.write("c.en", "a\n");
  CHECK(preprocess({"--prefix", dir.file("c"), "-o", dir.file("o")}).exit_code == 2);  // no languages
  CHECK(preprocess({"--prefix", dir.file("c"), "--src-lang", "de", "--tgt-lang", "en"}).exit_code == 2);  // no -o
  CHECK(preprocess({"--prefix", dir.file("c"), "--src-lang", "en", "--tgt-lang", "en", "-o", dir.file("o")})
            .exit_code == 2);
  auto r = preprocess({"--prefix", dir.file("c"), "--src-lang", "de", "--tgt-lang", "en", "-o", dir.file("o"),
                       "--set", "vocab.model_type=wordpiece"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("vocab.model_type"));
  CHECK_FALSE(fs::exists(dir.file("o")));
}

TEST_CASE("preprocess: the README command works as written on the Europarl v7 release sample") {
  std::string prefix = std::string(PARLA_SHARED_DIR) + "/data/europarl-v7-sample/europarl-v7.de-en-short";
  if (!fs::exists(prefix + ".de")) {
    WARN("skipped: " << prefix << ".de is absent");
    return;
  }
  TempDir dir("preprocess");
  auto r = run("parla-preprocess", {"--prefix", prefix, "--src-lang", "de", "--tgt-lang", "en", "-o", dir.file("ds")});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto info = parla::data::read_dataset_info(dir.file("ds"));
  auto stats = json::parse(slurp(dir.file("ds/stats.json")));
  CHECK(stats["inputs"]["train"]["pairs_read"] == 100);
  uint64_t pairs = 0;
  for (std::string s : {"train", "valid", "test"}) pairs += parla::data::open_split(info, s).src.size();
  CHECK(pairs == stats["inputs"]["train"]["pairs_kept"].get<uint64_t>());
}

TEST_CASE("preprocess: on the raw Europarl release, every markup line pair is removed and counted") {
  std::string base = std::string(PARLA_SHARED_DIR) + "/data/europarl-raw-release-en-fr/";
  if (!fs::exists(base + "en/ep-00-01-17.txt")) {
    WARN("skipped: " << base << " is absent");
    return;
  }
  TempDir dir("preprocess");
  // Independent count: lines that are exactly a CHAPTER, SPEAKER or P tag on the English side.
  std::regex tag(R"(^<(CHAPTER|SPEAKER|P)( [^<>]*)?>$)");
  size_t tags = 0;
  for (const auto& line : lines_of(base + "en/ep-00-01-17.txt")) tags += std::regex_match(line, tag);
  REQUIRE(tags > 300);
  auto r = preprocess({"--train-src", base + "en/ep-00-01-17.txt", "--train-tgt", base + "fr/ep-00-01-17.txt",
                       "--src-lang", "en", "--tgt-lang", "fr", "-o", dir.file("ds"), "--set",
                       "data.clean.drop_duplicates=false", "--vocab-size", "1000", "-q"},
                      /*small=*/false);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto stats = json::parse(slurp(dir.file("ds/stats.json")));
  CHECK(stats["inputs"]["train"]["dropped"]["markup"] == tags);
  for (std::string f : {"valid.en", "test.fr"})
    for (const auto& line : lines_of(dir.file("ds/" + f))) CHECK_FALSE(std::regex_match(line, tag));
}

TEST_CASE("preprocess: a slice of the gzipped Europarl it-en corpus runs end to end") {
  std::string base = std::string(PARLA_SHARED_DIR) + "/data/europarl-it-en/europarl.it-en";
  if (!fs::exists(base + ".it.gz")) {
    WARN("skipped: " << base << ".it.gz is absent");
    return;
  }
  TempDir dir("preprocess");
  // The first 3,000 pairs, gzipped again, keep the test to seconds.
  for (std::string lang : {"it", "en"}) {
    parla::text::LineReader r(base + "." + lang + ".gz");
    std::string content, line;
    for (int i = 0; i < 3000 && r.next(line); ++i) content += line + "\n";
    write_gz(dir.file("slice." + lang + ".gz"), content);
  }
  auto r = preprocess({"--prefix", dir.file("slice"), "--src-lang", "it", "--tgt-lang", "en", "-o", dir.file("ds"),
                       "--vocab-size", "1000", "--set", "runtime.threads=2", "-q"},
                      /*small=*/false);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto info = parla::data::read_dataset_info(dir.file("ds"));
  auto vocab = parla::text::SentencePieceVocab::load(info.src_spm_path);
  auto test = parla::data::open_split(info, "test");
  auto ref = lines_of(dir.file("ds/test.en"));
  REQUIRE(ref.size() == test.tgt.size());
  auto stats = json::parse(slurp(dir.file("ds/stats.json")));
  REQUIRE(ref.size() == stats["inputs"]["train"]["pairs_kept"].get<size_t>() / 10);  // capped at a tenth
  for (size_t i = 0; i < ref.size(); ++i) {
    auto ids = test.tgt.get(i);
    REQUIRE(vocab.decode(std::vector<int>(ids.begin(), ids.end())) == ref[i]);
  }
}

// parla-score-bleu through the executable: every sacreBLEU 2.6.0 conformance record of shared/bleu/expected.jsonl
// (text line byte for byte, n-gram statistics, lengths and BP via --stats), sacreBLEU's own file-based test
// vectors, output formats, and the bad-input contract (clear message, exit code, no crash).
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

#include "metrics/bleu_fixtures.h"
#include "support/run.h"
#include "support/temp_dir.h"

using parla::testing::run;
using parla::testing::TempDir;
using nlohmann::json;

namespace {

const char* kExe = "parla-score-bleu";

std::vector<std::string> record_args(const json& rec) {
  const std::string dir = parla::testing::bleu_fixture_dir() + "/";
  std::vector<std::string> args;
  for (const auto& r : rec["refs"]) args.push_back(dir + r.get<std::string>());
  args.push_back("-i");
  args.push_back(dir + rec["hyp"].get<std::string>());
  for (const auto& a : rec["sacrebleu_args"]) args.push_back(a);
  return args;
}

std::vector<std::string> with(std::vector<std::string> args, std::initializer_list<std::string> more) {
  args.insert(args.end(), more);
  return args;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < s.size()) {
    std::size_t nl = s.find('\n', start);
    if (nl == std::string::npos) nl = s.size();
    out.push_back(s.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

// The statistics part of a fixture record (corpus record or one sentence) against parla's --stats output.
void check_stats(const json& expected, const json& got) {
  CHECK(got["counts"] == expected["counts"]);
  CHECK(got["totals"] == expected["totals"]);
  for (int n = 0; n < 4; ++n) {
    CHECK(got["counts_reported"][n].get<double>() == expected["counts_reported"][n].get<double>());
    CHECK(got["totals_reported"][n].get<double>() == expected["totals_reported"][n].get<double>());
  }
  CHECK(got["sys_len"] == expected["sys_len"]);
  CHECK(got["ref_len"] == expected["ref_len"]);
  CHECK(got["bp"].get<double>() == expected["bp"].get<double>());
  CHECK(got["score"].get<double>() == Approx(expected["score"].get<double>()).epsilon(1e-12).margin(1e-12));
}

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

}  // namespace

TEST_CASE("every corpus-level conformance record matches sacreBLEU's output line and statistics", "[cli][conformance]") {
  if (!parla::testing::have_bleu_fixtures()) {
    WARN("../shared/bleu is absent; skipping");
    return;
  }
  int checked = 0, api_only = 0;
  for (const auto& rec : parla::testing::read_jsonl("expected.jsonl")) {
    if (rec["mode"] != "corpus" || rec["expect_error"] == true) continue;
    if (rec["cli_expressible"] != true) {
      ++api_only;  // corpus-level effective order exists only in sacreBLEU's Python API
      continue;
    }
    INFO(rec["id"].get<std::string>());
    auto args = record_args(rec);
    auto text = run(kExe, with(args, {"-f", "text", "-w", "2"}));
    REQUIRE(text.exit_code == 0);
    CHECK(text.out == rec["cli_text_w2"].get<std::string>() + "\n");
    auto stats = run(kExe, with(args, {"--stats"}));
    REQUIRE(stats.exit_code == 0);
    check_stats(rec, json::parse(stats.out)["bleu"]);
    ++checked;
  }
  CHECK(checked == 617 - 72 - 2 - 18);
  CHECK(api_only == 18);
}

TEST_CASE("every sentence-level conformance record matches sacreBLEU line by line", "[cli][conformance]") {
  if (!parla::testing::have_bleu_fixtures()) {
    WARN("../shared/bleu is absent; skipping");
    return;
  }
  int records = 0;
  for (const auto& rec : parla::testing::read_jsonl("expected.jsonl")) {
    if (rec["mode"] != "sentence") continue;
    INFO(rec["id"].get<std::string>());
    auto args = record_args(rec);
    auto text = run(kExe, with(args, {"-f", "text", "-w", "2"}));
    REQUIRE(text.exit_code == 0);
    auto stats = run(kExe, with(args, {"--stats"}));
    REQUIRE(stats.exit_code == 0);
    auto got_lines = lines_of(text.out), stat_lines = lines_of(stats.out);
    const auto& sentences = rec["sentences"];
    REQUIRE(got_lines.size() == sentences.size());
    REQUIRE(stat_lines.size() == sentences.size());
    for (std::size_t i = 0; i < sentences.size(); ++i) {
      const auto& s = sentences[i];
      std::string expected = "BLEU|" + rec["signature"].get<std::string>() + " = " + s["score_2dp"].get<std::string>() +
                             " " + fmt("%.1f", s["precisions"][0]) + "/" + fmt("%.1f", s["precisions"][1]) + "/" +
                             fmt("%.1f", s["precisions"][2]) + "/" + fmt("%.1f", s["precisions"][3]) +
                             " (BP = " + fmt("%.3f", s["bp"]) + " ratio = " + fmt("%.3f", s["ratio"]) +
                             " hyp_len = " + std::to_string(s["sys_len"].get<int>()) +
                             " ref_len = " + std::to_string(s["ref_len"].get<int>()) + ")";
      INFO("segment " << i + 1);
      CHECK(got_lines[i] == expected);
      check_stats(s, json::parse(stat_lines[i])["bleu"]);
    }
    ++records;
  }
  CHECK(records == 72);
}

TEST_CASE("the error records exit with status 1", "[cli][conformance]") {
  if (!parla::testing::have_bleu_fixtures()) {
    WARN("../shared/bleu is absent; skipping");
    return;
  }
  int records = 0;
  for (const auto& rec : parla::testing::read_jsonl("expected.jsonl")) {
    if (rec["expect_error"] != true) continue;
    INFO(rec["id"].get<std::string>());
    auto r = run(kExe, with(record_args(rec), {"-f", "text"}));
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK_FALSE(r.err.empty());
    ++records;
  }
  CHECK(records == 2);
}

TEST_CASE("sacreBLEU's file-based test vectors (WMT17 en-de systems) score the same", "[cli][conformance]") {
  if (!parla::testing::have_bleu_fixtures()) {
    WARN("../shared/bleu is absent; skipping");
    return;
  }
  const std::string dir = parla::testing::bleu_fixture_dir() + "/";
  int checked = 0;
  for (const auto& v : parla::testing::read_jsonl("sacrebleu_testvectors.jsonl")) {
    if (v["kind"] != "cli_corpus" || v.value("verified", json()) != true || !v["input"].contains("files")) continue;
    const std::string metric = v["metric"];
    if (metric != "BLEU" && metric != "chrF") continue;
    INFO(v["id"].get<std::string>());
    std::vector<std::string> args = {dir + v["input"]["files"]["ref"].get<std::string>(), "-i",
                                     dir + v["input"]["files"]["hyp"].get<std::string>(), "--stats"};
    if (metric == "BLEU") {
      args.insert(args.end(), {"-tok", v["options"].value("tokenize", "13a")});
    } else {
      args.insert(args.end(), {"-m", "chrf"});
      if (v["options"].value("eps_smoothing", false)) args.push_back("--chrf-eps-smoothing");
    }
    auto r = run(kExe, args);
    REQUIRE(r.exit_code == 0);
    auto j = json::parse(r.out)[metric == "BLEU" ? "bleu" : "chrf"];
    double score = j["score"];
    // test.sh compares chrF as printed with 4 decimals (chrF++.py's precision), BLEU within 0.01.
    double shown = metric == "BLEU" ? score : std::stod(fmt("%.4f", score));
    CHECK(std::abs(shown - v["expected"]["score"].get<double>()) <= v["expected"]["tolerance"].get<double>());
    CHECK(score == Approx(v["actual"]["score"].get<double>()).epsilon(1e-12));
    if (metric == "BLEU") {
      CHECK(j["counts"] == v["actual"]["counts"]);
      CHECK(j["totals"] == v["actual"]["totals"]);
      CHECK(j["sys_len"] == v["actual"]["sys_len"]);
      CHECK(j["ref_len"] == v["actual"]["ref_len"]);
    }
    ++checked;
  }
  CHECK(checked == 19);
}

TEST_CASE("JSON output has sacreBLEU's keys, order and rounded score", "[cli]") {
  if (!parla::testing::have_bleu_fixtures()) {
    WARN("../shared/bleu is absent; skipping");
    return;
  }
  json rec;
  for (const auto& r : parla::testing::read_jsonl("expected.jsonl"))
    if (r["id"] == "m30k_en_light::default") rec = r;
  REQUIRE_FALSE(rec.is_null());
  auto r = run(kExe, record_args(rec));  // JSON is the default format
  REQUIRE(r.exit_code == 0);
  // json.dumps(indent=1): one space of indentation, keys in insertion order, score = float("78.90") = 78.9.
  std::string expected = "{\n \"name\": \"BLEU\",\n \"score\": 78.9,\n \"signature\": \"" +
                         rec["signature"].get<std::string>() + "\",\n \"verbose_score\": \"" +
                         rec["verbose"].get<std::string>() +
                         "\",\n \"nrefs\": \"1\",\n \"case\": \"mixed\",\n \"eff\": \"no\",\n \"tok\": \"13a\",\n"
                         " \"smooth\": \"exp\",\n \"version\": \"2.6.0\"\n}\n";
  CHECK(r.out == expected);
  auto b = run(kExe, with(record_args(rec), {"-b"}));
  CHECK(b.out == rec["score_2dp"].get<std::string>() + "\n");
  auto w1 = run(kExe, with(record_args(rec), {"-b", "-w", "1"}));
  CHECK(w1.out == rec["score_1dp"].get<std::string>() + "\n");
  auto sh = run(kExe, with(record_args(rec), {"-f", "text", "--short"}));
  CHECK(sh.out.rfind("BLEU|" + rec["signature_short"].get<std::string>() + " = ", 0) == 0);
}

TEST_CASE("BLEU and chrF together print aligned text lines, BLEU first", "[cli][chrf]") {
  TempDir tmp("score-bleu-two");
  auto ref = tmp.write("ref", "the cat sat on the mat\nhello world\n");
  auto hyp = tmp.write("hyp", "the cat sat on a mat\nhello there world\n");
  auto r = run(kExe, {ref, "-i", hyp, "-m", "chrf", "bleu", "-f", "text"});
  REQUIRE(r.exit_code == 0);
  auto lines = lines_of(r.out);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].find("BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = ") != std::string::npos);
  CHECK(lines[1].rfind("chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0 = ", 0) == 0);
  CHECK(lines[0].find(" = ") == lines[1].find(" = "));
}

TEST_CASE("the hypothesis is read from standard input without -i", "[cli]") {
  TempDir tmp("score-bleu-stdin");
  auto ref = tmp.write("ref", "a b c d e\n");
  auto hyp = tmp.write("hyp", "a b c d e\n");
  auto r = run(kExe, {ref, "-b"}, hyp);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "100.00\n");
}

TEST_CASE("a line-count mismatch names both files and their counts and exits 1", "[cli][errors]") {
  TempDir tmp("score-bleu-mismatch");
  auto ref = tmp.write("ref.txt", "a\nb\nc\nd\n");
  auto hyp = tmp.write("hyp.txt", "a\nb\nc\n");
  auto r = run(kExe, {ref, "-i", hyp});
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find(hyp + "' has 3") != std::string::npos);
  CHECK(r.err.find(ref + "' has 4") != std::string::npos);
}

TEST_CASE("a missing file is named and exits 1", "[cli][errors]") {
  TempDir tmp("score-bleu-missing");
  auto ref = tmp.write("ref.txt", "a\n");
  auto r = run(kExe, {ref, "-i", tmp.file("nope.txt")});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find(tmp.file("nope.txt")) != std::string::npos);
  auto r2 = run(kExe, {tmp.file("noref.txt"), "-i", ref});
  CHECK(r2.exit_code == 1);
  CHECK(r2.err.find(tmp.file("noref.txt")) != std::string::npos);
}

TEST_CASE("invalid UTF-8 names the file and the line and exits 1", "[cli][errors]") {
  TempDir tmp("score-bleu-utf8");
  auto ref = tmp.write("ref.txt", "a\nb\nc\n");
  auto hyp = tmp.write("hyp.txt", "a\nb\xFF\nc\n");
  auto r = run(kExe, {ref, "-i", hyp});
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find(hyp + "' line 2") != std::string::npos);
}

TEST_CASE("an all-empty hypothesis scores 0.00 with a warning, a file without lines is an error", "[cli][errors]") {
  TempDir tmp("score-bleu-empty");
  auto ref = tmp.write("ref.txt", "a b\nc d\n");
  auto blank = tmp.write("blank.txt", "\n\n");
  auto r = run(kExe, {ref, "-i", blank, "-f", "text"});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = 0.00 0.0/0.0/0.0/0.0 "
                 "(BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 4)\n");
  CHECK(r.err.find("warn") != std::string::npos);
  auto none = tmp.write("none.txt", "");
  auto empty_ref = tmp.write("empty_ref.txt", "");
  auto e = run(kExe, {empty_ref, "-i", none});
  CHECK(e.exit_code == 1);
  CHECK(e.err.find("no lines") != std::string::npos);
}

TEST_CASE("a report that cannot be written to standard output exits 1 naming the reason", "[cli][errors]") {
  TempDir tmp("score-bleu-stdout");
  auto ref = tmp.write("ref.txt", "the cat sat on the mat\na dog\n");
  auto hyp = tmp.write("hyp.txt", "the cat sat on a mat\na dog\n");
  const std::string cmd = parla::testing::shell_quote(std::string(PARLA_BIN_DIR) + "/" + kExe) + " " +
                          parla::testing::shell_quote(ref) + " -i " + parla::testing::shell_quote(hyp);
  for (const char* mode : {"", " --sentence-level", " --stats", " -m chrf -f text"}) {
    INFO(mode);
    auto ok = run("/bin/bash", {"-c", cmd + mode});
    CHECK(ok.exit_code == 0);
    CHECK_FALSE(ok.out.empty());
    auto full = run("/bin/bash", {"-c", cmd + mode + " > /dev/full"});
    CHECK(full.exit_code == 1);
    CHECK(full.err.find("cannot write standard output: No space left on device") != std::string::npos);
    auto closed = run("/bin/bash", {"-c", cmd + mode + " >&-"});
    CHECK(closed.exit_code == 1);
    CHECK(closed.err.find("cannot write standard output: Bad file descriptor") != std::string::npos);
  }
}

TEST_CASE("bad options exit 2 with a message", "[cli][errors]") {
  TempDir tmp("score-bleu-usage");
  auto ref = tmp.write("ref.txt", "a\n");
  for (const auto& args : std::vector<std::vector<std::string>>{{ref, "-i", ref, "-tok", "moses"},
                                                                 {ref, "-i", ref, "-s", "laplace"},
                                                                 {ref, "-i", ref, "-f", "xml"},
                                                                 {ref, "-i", ref, "-m", "ter"},
                                                                 {"-i", ref}}) {
    auto r = run(kExe, args);
    CHECK(r.exit_code == 2);
    CHECK_FALSE(r.err.empty());
  }
}

TEST_CASE("100 hypothesis lines ending in ' .' warn unless --force", "[cli]") {
  TempDir tmp("score-bleu-force");
  std::string text;
  for (int i = 0; i < 100; ++i) text += "a sentence .\n";
  auto ref = tmp.write("ref.txt", text);
  auto warned = run(kExe, {ref, "-i", ref, "-b"});
  CHECK(warned.err.find("tokenized period") != std::string::npos);
  auto forced = run(kExe, {ref, "-i", ref, "-b", "--force"});
  CHECK(forced.err.find("tokenized period") == std::string::npos);
  CHECK(warned.out == forced.out);
}

TEST_CASE("score-bleu: --version and -V print parla's version", "[cli]") {
  CHECK(run(kExe, {"--version"}).out.find("parla-score-bleu 0.1.0") != std::string::npos);
  CHECK(run(kExe, {"-V"}).out.find("parla-score-bleu 0.1.0") != std::string::npos);
  auto help = run(kExe, {"--help"});
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("sacreBLEU 2.6.0") != std::string::npos);
}

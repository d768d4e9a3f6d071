// The synthetic toy corpus (tools/toy-corpus.py) that the quickstart trains on: reproducible from its seed,
// held-out sentences never in train, lengths in range, and its rules (numbers spelled out, verb agreement)
// checked against references written here independently of the generator.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/files.h"
#include "support/run.h"
#include "support/temp_dir.h"

using parla::testing::have_python;
using parla::testing::read_lines;
using parla::testing::run;
using parla::testing::shell_quote;

namespace {

const std::string kGenerator = std::string(PARLA_SOURCE_DIR) + "/tools/toy-corpus.py";


// Tokens of a written line: words separated by spaces, the final full stop (attached to the last word) a token
// of its own, as BLEU's 13a tokenizer sees it.
std::vector<std::string> split(const std::string& s) {
  std::istringstream is(s);
  std::vector<std::string> toks;
  for (std::string t; is >> t;) toks.push_back(t);
  if (!toks.empty() && toks.back().size() > 1 && toks.back().back() == '.') {
    toks.back().pop_back();
    toks.push_back(".");
  }
  return toks;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// English number words, written out here from the textbook rule (not taken from the generator).
std::string spell(int n) {
  static const char* ones[] = {"zero",    "one",     "two",       "three",    "four",     "five",    "six",
                               "seven",   "eight",   "nine",      "ten",      "eleven",   "twelve",  "thirteen",
                               "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"};
  static const char* tens[] = {"", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"};
  if (n < 20) return ones[n];
  return std::string(tens[n / 10]) + (n % 10 ? std::string(" ") + ones[n % 10] : "");
}

parla::testing::RunResult generate(const parla::testing::TempDir& dir, const std::string& sub, int train, int seed) {
  return run("/usr/bin/env", {"python3", kGenerator, "--out-dir", dir.file(sub), "--train", std::to_string(train),
                              "--valid", "100", "--test", "100", "--seed", std::to_string(seed)});
}

}  // namespace

TEST_CASE("toy corpus: the same seed gives the same files and another seed other sentences") {
  if (!have_python()) {
    WARN("python3 is not installed; skipped");
    return;
  }
  parla::testing::TempDir dir("toy-corpus");
  REQUIRE(generate(dir, "a", 500, 3).exit_code == 0);
  REQUIRE(generate(dir, "b", 500, 3).exit_code == 0);
  REQUIRE(generate(dir, "c", 500, 4).exit_code == 0);
  for (const char* f : {"train.xx", "train.yy", "valid.xx", "valid.yy", "test.xx", "test.yy"}) {
    INFO(f);
    CHECK(slurp(dir.file(std::string("a/") + f)) == slurp(dir.file(std::string("b/") + f)));
    CHECK(slurp(dir.file(std::string("a/") + f)) != slurp(dir.file(std::string("c/") + f)));
  }
  CHECK(read_lines(dir.file("a/train.xx")).size() == 500);
  CHECK(read_lines(dir.file("a/train.yy")).size() == 500);
  CHECK(read_lines(dir.file("a/test.xx")).size() == 100);
}

TEST_CASE("toy corpus: held-out sources never occur in train and every line has 4 to 20 tokens") {
  if (!have_python()) {
    WARN("python3 is not installed; skipped");
    return;
  }
  parla::testing::TempDir dir("toy-corpus");
  REQUIRE(generate(dir, "a", 3000, 1).exit_code == 0);
  auto train = read_lines(dir.file("a/train.xx"));
  std::set<std::string> train_set(train.begin(), train.end());
  CHECK(train_set.size() == train.size());  // no repeated training source either
  for (const char* held : {"a/valid.xx", "a/test.xx"}) {
    for (const auto& s : read_lines(dir.file(held))) {
      INFO(held << ": " << s);
      CHECK(train_set.count(s) == 0);
    }
  }
  for (const char* f : {"a/train.xx", "a/train.yy", "a/test.xx", "a/test.yy"}) {
    for (const auto& line : read_lines(dir.file(f))) {
      size_t n = split(line).size();
      INFO(f << ": " << line);
      CHECK(n >= 4);
      CHECK(n <= 20);
    }
  }
}

TEST_CASE("toy corpus: every count written in digits is spelled out in the translation") {
  if (!have_python()) {
    WARN("python3 is not installed; skipped");
    return;
  }
  parla::testing::TempDir dir("toy-corpus");
  REQUIRE(generate(dir, "a", 2000, 2).exit_code == 0);
  auto src = read_lines(dir.file("a/train.xx"));
  auto tgt = read_lines(dir.file("a/train.yy"));
  REQUIRE(src.size() == tgt.size());
  std::map<std::string, int> units, tens;
  for (int n = 1; n < 20; ++n) units[spell(n)] = n;
  for (int n = 20; n < 100; n += 10) tens[spell(n)] = n;
  int counts = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    // Compared as multisets: this rule is about the numbers; word order is another rule.
    std::multiset<int> expected, found;
    for (const auto& t : split(src[i])) {
      if (t.find_first_not_of("0123456789") == std::string::npos) {
        expected.insert(std::stoi(t));
        ++counts;
      }
    }
    auto toks = split(tgt[i]);
    for (size_t k = 0; k < toks.size(); ++k) {
      if (tens.count(toks[k])) {
        int n = tens[toks[k]];
        if (k + 1 < toks.size() && units.count(toks[k + 1]) && units[toks[k + 1]] < 10) n += units[toks[++k]];
        found.insert(n);
      } else if (units.count(toks[k])) {
        found.insert(units[toks[k]]);
      }
    }
    INFO(src[i] << " -> " << tgt[i]);
    CHECK(found == expected);
  }
  CHECK(counts > 100);  // the rule is exercised, not vacuous
}

TEST_CASE("toy corpus: the main verb agrees with the number of the subject (does/do, sees/see)") {
  if (!have_python()) {
    WARN("python3 is not installed; skipped");
    return;
  }
  parla::testing::TempDir dir("toy-corpus");
  REQUIRE(generate(dir, "a", 2000, 5).exit_code == 0);
  auto tgt = read_lines(dir.file("a/train.yy"));
  // Checked on negated present sentences, where the agreement is visible in one word: "does not" after a
  // singular subject, "do not" after a plural one. The subject is singular exactly when it starts with
  // "a"/"an", or with "the" followed by words whose last is not a plural in -s.
  int checked = 0;
  for (const auto& line : tgt) {
    auto toks = split(line);
    size_t aux = 0;
    while (aux + 1 < toks.size() && !((toks[aux] == "does" || toks[aux] == "do") && toks[aux + 1] == "not")) ++aux;
    if (aux + 1 >= toks.size()) continue;
    // Only simple subjects (no relative clause, no count): article, adjectives, noun, then the auxiliary.
    if (std::find(toks.begin(), toks.begin() + aux, "that") != toks.begin() + aux) continue;
    if (toks[0] != "the" && toks[0] != "a" && toks[0] != "an") continue;
    bool singular_article = toks[0] == "a" || toks[0] == "an";
    const std::string& noun = toks[aux - 1];
    bool plural_noun = noun.back() == 's';  // the toy lexicon has no singular noun ending in -s
    bool singular = singular_article || !plural_noun;
    INFO(line);
    CHECK(toks[aux] == (singular ? "does" : "do"));
    ++checked;
  }
  CHECK(checked > 20);
}

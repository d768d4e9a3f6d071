#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <random>

#include "text/europarl_day.h"
#include "text/europarl_day_alignment.h"
#include "support/europarl_reference.h"
#include "support/files.h"

using parla::text::BeadKind;
using parla::text::EuroparlDay;
using parla::text::EuroparlDayAligner;
using parla::text::match_keys;
using parla::text::read_europarl_day;
using parla::text::SentencePair;

namespace day_alignment_test {

EuroparlDay day_of(const std::vector<std::string>& lines) {
  EuroparlDay day;
  read_europarl_day(lines, day);
  return day;
}

// Longest common subsequence length, the textbook O(n m) table: the reference for match_keys.
size_t lcs(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::vector<size_t>> t(a.size() + 1, std::vector<size_t>(b.size() + 1, 0));
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j)
      t[i][j] = a[i - 1] == b[j - 1] ? t[i - 1][j - 1] + 1 : std::max(t[i - 1][j], t[i][j - 1]);
  return t[a.size()][b.size()];
}

std::string words(int n, const std::string& w) {
  std::string s;
  for (int k = 0; k < n; ++k) s += (k ? " " : "") + w;
  return s + ".";
}


TEST_CASE("match_keys pairs equal keys in order and, when each side only inserts, finds every common key") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    // A common sequence of distinct keys, each side with its own inserted keys: the LCS is the common part.
    std::vector<std::string> common, a, b;
    int n = rng() % 12;
    for (int k = 0; k < n; ++k) common.push_back("c" + std::to_string(k));
    int extra = 0;
    for (auto* side : {&a, &b}) {
      for (const auto& key : common) {
        while (rng() % 4 == 0) side->push_back("x" + std::to_string(extra++));
        side->push_back(key);
      }
      while (rng() % 3 == 0) side->push_back("x" + std::to_string(extra++));
    }
    auto m = match_keys(a, b);
    for (size_t k = 0; k < m.size(); ++k) {
      CHECK(a[m[k].first] == b[m[k].second]);
      if (k) CHECK((m[k].first > m[k - 1].first && m[k].second > m[k - 1].second));
    }
    CHECK(m.size() == lcs(a, b));
    CHECK(m.size() == common.size());
  }
}

TEST_CASE("match_keys stays monotone and matches equal keys on arbitrary sequences with repeats") {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::string> a(rng() % 10), b(rng() % 10);
    for (auto& k : a) k = std::to_string(rng() % 4);
    for (auto& k : b) k = std::to_string(rng() % 4);
    auto m = match_keys(a, b);
    for (size_t k = 0; k < m.size(); ++k) {
      CHECK(a[m[k].first] == b[m[k].second]);
      if (k) CHECK((m[k].first > m[k - 1].first && m[k].second > m[k - 1].second));
    }
    CHECK(m.size() <= lcs(a, b));
  }
}

TEST_CASE("a day with the same tags on both sides aligns paragraph by paragraph") {
  std::vector<std::string> en = {"<CHAPTER ID=1>", "Title", "<SPEAKER ID=1 NAME=\"A\">", words(5, "aa"),
                                 words(12, "bb"), "<P>", words(3, "cc"), "<SPEAKER ID=2 NAME=\"B\">", words(8, "dd")};
  std::vector<std::string> fr = {"<CHAPTER ID=1>", "Titre", "<SPEAKER ID=1 LANGUAGE=\"EN\" NAME=\"A\">",
                                 words(5, "AA"), words(12, "BB"), "<P>", words(3, "CC"), "<SPEAKER ID=2 NAME=\"B\">",
                                 words(8, "DD")};
  EuroparlDayAligner aligner("en", "fr", {}, /*split_lines=*/false);
  std::vector<SentencePair> pairs;
  auto stats = aligner.align(day_of(en), day_of(fr), pairs);
  REQUIRE(pairs.size() == 5);
  CHECK(pairs[0].src == "Title");
  CHECK(pairs[0].tgt == "Titre");
  CHECK(pairs[2].src == words(12, "bb"));
  CHECK(pairs[2].tgt == words(12, "BB"));
  CHECK(pairs[4].tgt == words(8, "DD"));
  CHECK(stats.chapters_matched == 1);
  CHECK(stats.speeches_matched == 3);  // the title's speech and the two speakers
  CHECK(stats.blocks == 4);
  CHECK(stats.beads[static_cast<int>(BeadKind::k1_1)] == 5);
  CHECK(stats.pairs == 5);
  CHECK_FALSE(stats.resynchronised());
}

TEST_CASE("a speech on one side only is resynchronised: its text is dropped and counted, the rest aligns") {
  std::vector<std::string> en = {"<CHAPTER ID=1>", "<SPEAKER ID=1>", words(5, "aa"), "<SPEAKER ID=2>",
                                 words(9, "zz"),   "<SPEAKER ID=3>", words(7, "cc")};
  std::vector<std::string> fr = {"<CHAPTER ID=1>", "<SPEAKER ID=1>", words(5, "AA"), "<SPEAKER ID=3>",
                                 words(7, "CC")};
  EuroparlDayAligner aligner("en", "fr", {}, false);
  std::vector<SentencePair> pairs;
  auto stats = aligner.align(day_of(en), day_of(fr), pairs);
  REQUIRE(pairs.size() == 2);
  CHECK(pairs[1].src == words(7, "cc"));
  CHECK(pairs[1].tgt == words(7, "CC"));
  CHECK(stats.speeches_only_src == 1);
  CHECK(stats.speeches_only_tgt == 0);
  CHECK(stats.resynchronised());
  CHECK(stats.first_resync_src_line == 4);  // en's SPEAKER ID=2
  CHECK(stats.first_resync_tgt_line == 4);  // fr's next anchor, SPEAKER ID=3
  CHECK(stats.blocks_dropped == 1);
  CHECK(stats.dropped_src_sentences == 1);
}

TEST_CASE("a chapter whose speeches differ on the two sides aligns the text between the common anchors") {
  // Speaker IDs 2 and 9 differ: the text between speaker 1 and speaker 3 becomes one block on each side.
  std::vector<std::string> en = {"<CHAPTER ID=1>", "<SPEAKER ID=1>", words(5, "aa"), "<SPEAKER ID=2>",
                                 words(9, "bb"),   words(4, "b2"),   "<SPEAKER ID=3>", words(7, "cc")};
  std::vector<std::string> fr = {"<CHAPTER ID=1>", "<SPEAKER ID=1>", words(5, "AA"), "<SPEAKER ID=9>",
                                 words(9, "BB"),   words(4, "B2"),   "<SPEAKER ID=3>", words(7, "CC")};
  EuroparlDayAligner aligner("en", "fr", {}, false);
  std::vector<SentencePair> pairs;
  auto stats = aligner.align(day_of(en), day_of(fr), pairs);
  REQUIRE(pairs.size() == 4);
  CHECK(pairs[1].src == words(9, "bb"));
  CHECK(pairs[1].tgt == words(9, "BB"));
  CHECK(pairs[2].tgt == words(4, "B2"));
  CHECK(stats.speeches_only_src == 1);
  CHECK(stats.speeches_only_tgt == 1);
  CHECK(stats.blocks_dropped == 0);
}

TEST_CASE("a speech with different paragraph counts is aligned as one block, and 2-1 beads join their sentences") {
  std::vector<std::string> en = {"<SPEAKER ID=1>", words(10, "aa"), "<P>", words(3, "bb"), words(4, "cc"), "<P>",
                                 words(20, "dd")};
  std::vector<std::string> fr = {"<SPEAKER ID=1>", words(10, "AA"), "<P>", words(8, "BC"), words(20, "DD")};
  EuroparlDayAligner aligner("en", "fr", {}, false);
  std::vector<SentencePair> pairs;
  auto stats = aligner.align(day_of(en), day_of(fr), pairs);
  CHECK(stats.paragraph_count_mismatches == 1);
  REQUIRE(pairs.size() == 3);
  CHECK(pairs[1].src == words(3, "bb") + " " + words(4, "cc"));
  CHECK(pairs[1].tgt == words(8, "BC"));
  CHECK(stats.beads[static_cast<int>(BeadKind::k2_1)] == 1);
}

TEST_CASE("a block that is not parallel (most sentences unaligned) is dropped and counted") {
  std::vector<std::string> en = {"<SPEAKER ID=1>", "Yes."};
  std::vector<std::string> fr = {"<SPEAKER ID=1>"};
  for (int k = 0; k < 6; ++k) fr.push_back(words(40, "long" + std::to_string(k)));
  EuroparlDayAligner aligner("en", "fr", {}, false);
  std::vector<SentencePair> pairs;
  auto stats = aligner.align(day_of(en), day_of(fr), pairs);
  CHECK(pairs.empty());
  CHECK(stats.blocks == 1);
  CHECK(stats.blocks_dropped == 1);
  CHECK(stats.dropped_src_sentences == 1);
  CHECK(stats.dropped_tgt_sentences == 6);
}


using parla::testing::join_paragraphs;
using parla::testing::read_lines;

std::string collapse(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != ' ' || (!out.empty() && out.back() != ' ')) out += c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// Precision and recall of found pairs against the gold pairs, as multisets of whitespace-collapsed texts.
std::pair<double, double> score(const std::vector<SentencePair>& found, const std::vector<SentencePair>& gold) {
  std::map<std::pair<std::string, std::string>, int> want;
  for (const auto& p : gold) ++want[{collapse(p.src), collapse(p.tgt)}];
  size_t correct = 0;
  for (const auto& p : found) {
    auto it = want.find({collapse(p.src), collapse(p.tgt)});
    if (it != want.end() && it->second > 0) {
      --it->second;
      ++correct;
    }
  }
  return {double(correct) / found.size(), double(correct) / gold.size()};
}


TEST_CASE("on a day of the real release, the aligner recovers the reference pairs (precision and recall >= 0.95)") {
  std::string dir = std::string(PARLA_SHARED_DIR) + "/data/europarl-raw-release-en-fr";
  if (!std::filesystem::exists(dir)) {
    WARN("skipped: " << dir << " is absent");
    return;
  }
  auto en = read_lines(dir + "/en/ep-00-01-17.txt"), fr = read_lines(dir + "/fr/ep-00-01-17.txt");
  REQUIRE(en.size() == fr.size());
  std::vector<SentencePair> gold;
  for (auto& [src, tgt] : parla::testing::reference_pairs(en, fr)) gold.push_back({src, tgt});
  REQUIRE(gold.size() > 500);

  SECTION("the aligner alone, on the reference sentences") {
    std::vector<SentencePair> found;
    EuroparlDayAligner("en", "fr", {}, false).align(day_of(en), day_of(fr), found);
    auto [precision, recall] = score(found, gold);
    INFO("precision " << precision << " recall " << recall);
    CHECK(precision >= 0.98);
    CHECK(recall >= 0.98);
  }
  SECTION("splitting the joined paragraphs, then aligning") {
    std::vector<SentencePair> found;
    EuroparlDayAligner("en", "fr").align(day_of(join_paragraphs(en)), day_of(join_paragraphs(fr)), found);
    auto [precision, recall] = score(found, gold);
    INFO("precision " << precision << " recall " << recall);
    CHECK(precision >= 0.95);
    CHECK(recall >= 0.95);
  }
}

}  // namespace day_alignment_test

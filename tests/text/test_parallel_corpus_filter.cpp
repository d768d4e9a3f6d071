#include <catch2/catch.hpp>

#include "text/parallel_corpus_filter.h"

using parla::CleanConfig;
using parla::text::DropReason;
using parla::text::FilterScope;
using parla::text::ParallelCorpusFilter;

namespace {
// Runs one pair through a fresh filter; returns "" when kept, else the reason's name.
std::string verdict(ParallelCorpusFilter& f, const std::string& s, const std::string& t) {
  std::string cs, ct;
  if (f.accept(s, t, cs, ct)) return "";
  return parla::text::drop_reason_name(f.last_reason());
}
std::string verdict(const CleanConfig& c, const std::string& s, const std::string& t) {
  ParallelCorpusFilter f(c);
  return verdict(f, s, t);
}
}  // namespace

TEST_CASE("a clean pair is kept, cleaned") {
  ParallelCorpusFilter f(CleanConfig{});
  std::string cs, ct;
  REQUIRE(f.accept("  Guten   Tag ", "Good\tday", cs, ct));
  CHECK(cs == "Guten Tag");
  CHECK(ct == "Good day");
  CHECK(f.stats().kept == 1);
  CHECK(f.stats().edited_whitespace == 1);  // the source; the target's tab is a control character
  CHECK(f.stats().edited_control == 1);
}

TEST_CASE("pairs with invalid UTF-8 on either side are dropped and counted, not a crash") {
  CHECK(verdict(CleanConfig{}, "caf\xE9", "cafe") == "invalid_utf8");
  CHECK(verdict(CleanConfig{}, "cafe", "\xC0\xAF") == "invalid_utf8");
}

TEST_CASE("Europarl markup on either side drops the pair unless remove_markup is off") {
  CHECK(verdict(CleanConfig{}, "<P>", "<P>") == "markup");
  CHECK(verdict(CleanConfig{}, "<SPEAKER ID=1 NAME=\"X\">", "text") == "markup");
  CleanConfig keep;
  keep.remove_markup = false;
  CHECK(verdict(keep, "<P>", "<P>") == "");
}

TEST_CASE("empty pairs are dropped, also when a side is only whitespace or control characters") {
  CHECK(verdict(CleanConfig{}, "", "text") == "empty");
  CHECK(verdict(CleanConfig{}, "text", "  \t ") == "empty");
  CHECK(verdict(CleanConfig{}, "\x01\x02", "text") == "empty");
  CleanConfig keep;
  keep.drop_empty = false;
  CHECK(verdict(keep, "", "text") == "");
}

TEST_CASE("a side longer than max_tokens drops the pair, exactly max_tokens is kept") {
  CleanConfig c;
  c.max_tokens = 3;
  c.max_length_ratio = 0;
  CHECK(verdict(c, "a b c", "x y z") == "");
  CHECK(verdict(c, "a b c d", "x") == "too_long");
  CHECK(verdict(c, "a", "w x y z") == "too_long");
  c.max_tokens = 0;
  CHECK(verdict(c, std::string(2000, 'a') + " b c d e f", "x") == "");
}

TEST_CASE("a token-length ratio above max_length_ratio drops the pair, equal to it is kept") {
  CleanConfig c;
  c.max_length_ratio = 2.0;
  CHECK(verdict(c, "a b", "x y z w") == "");              // 4 / 2 = 2.0
  CHECK(verdict(c, "a b", "v w x y z") == "length_ratio");  // 5 / 2
  CHECK(verdict(c, "v w x y z", "a b") == "length_ratio");  // either direction
  c.max_length_ratio = 0;
  CHECK(verdict(c, "a", "v w x y z") == "");
}

TEST_CASE("identical sides are dropped only when drop_identical is on") {
  CHECK(verdict(CleanConfig{}, "Euro 2000", "Euro 2000") == "");
  CleanConfig c;
  c.drop_identical = true;
  CHECK(verdict(c, "Euro 2000", "Euro 2000") == "identical");
  CHECK(verdict(c, "Euro 2000", "Euro  2000 ") == "identical");  // compared after cleaning
}

TEST_CASE("exact duplicate pairs after cleaning are dropped, the first occurrence kept") {
  ParallelCorpusFilter f(CleanConfig{});
  CHECK(verdict(f, "Hallo Welt", "Hello world") == "");
  CHECK(verdict(f, "Hallo  Welt", "Hello world ") == "duplicate");
  CHECK(verdict(f, "Hallo Welt", "Hello, world") == "");      // a different target is a different pair
  CHECK(verdict(f, "Hallo WeltHello", "world") == "");          // the boundary between sides matters
  CleanConfig keep;
  keep.drop_duplicates = false;
  ParallelCorpusFilter g(keep);
  CHECK(verdict(g, "a", "b") == "");
  CHECK(verdict(g, "a", "b") == "");
}

TEST_CASE("the first failing check is the one counted, and the counts add up") {
  CleanConfig c;
  c.max_tokens = 2;
  c.drop_identical = true;
  ParallelCorpusFilter f(c);
  std::vector<std::pair<std::string, std::string>> pairs = {
      {"ok one", "fine one"}, {"<P>", ""},        {"", "a b c"},     {"a b c", "a b c"},
      {"x", "x"},             {"ok one", "fine one"}, {"\xFF", "<P>"}, {"two", "zwei"}};
  for (auto& [s, t] : pairs) verdict(f, s, t);
  const auto& st = f.stats();
  CHECK(st.read == 8);
  CHECK(st.kept == 2);
  CHECK(st.dropped[static_cast<int>(DropReason::kMarkup)] == 1);
  CHECK(st.dropped[static_cast<int>(DropReason::kEmpty)] == 1);
  CHECK(st.dropped[static_cast<int>(DropReason::kTooLong)] == 1);
  CHECK(st.dropped[static_cast<int>(DropReason::kIdentical)] == 1);
  CHECK(st.dropped[static_cast<int>(DropReason::kDuplicate)] == 1);
  CHECK(st.dropped[static_cast<int>(DropReason::kInvalidUtf8)] == 1);
  CHECK(st.read == st.kept + st.dropped_total());
  auto j = st.to_json();
  CHECK(j["dropped"]["duplicate"] == 1);
  CHECK(j["pairs_kept"] == 2);
}

TEST_CASE("held-out sets keep long, unbalanced, identical and duplicate pairs") {
  CleanConfig c;
  c.max_tokens = 2;
  c.drop_identical = true;
  ParallelCorpusFilter f(c, FilterScope::kHeldOut);
  CHECK(verdict(f, "a b c d", "x") == "");
  CHECK(verdict(f, "a b c d", "x") == "");
  CHECK(verdict(f, "same", "same") == "");
  CHECK(verdict(f, "", "x") == "empty");
}

TEST_CASE("the pair hash separates sides and is stable") {
  using parla::text::pair_hash;
  CHECK(pair_hash("ab", "c") != pair_hash("a", "bc"));
  CHECK(pair_hash("a", "b") != pair_hash("b", "a"));
  CHECK(pair_hash("a", "b") == pair_hash(std::string("a"), std::string("b")));
}

// The BLEU tokenizers: each rule of sacreBLEU's 13a, intl, zh, char and none (shared/bleu/README.md), and every
// line of shared/bleu/tokenization.jsonl (sacreBLEU 2.6.0's token sequences) with and without lowercasing.
#include <catch2/catch.hpp>

#include "metrics/tokenizer.h"
#include "metrics/bleu_fixtures.h"
#include "text/unicode.h"

using parla::metrics::TokenizerKind;
using parla::metrics::tokenize;

namespace {
std::string t13a(const std::string& s) { return tokenize(TokenizerKind::k13a, s); }
std::string intl(const std::string& s) { return tokenize(TokenizerKind::kIntl, s); }
std::string zh(const std::string& s) { return tokenize(TokenizerKind::kZh, s); }
}  // namespace

TEST_CASE("13a deletes <skipped> case-sensitively", "[tokenizer][13a]") {
  CHECK(t13a("a<skipped>b") == "ab");
  CHECK(t13a("a<SKIPPED>b") == "a < SKIPPED > b");
}

TEST_CASE("13a un-escapes only quot, amp, lt, gt, in that order, and only when '&' is present", "[tokenizer][13a]") {
  CHECK(t13a("&quot;x&quot;") == "\" x \"");
  CHECK(t13a("a &amp; b") == "a & b");
  CHECK(t13a("&amp;quot;") == "& quot ;");  // &amp; -> &, then &quot; is not un-escaped again
  CHECK(t13a("&amp;lt;") == "<");           // &amp; -> &lt; -> <
  CHECK(t13a("&QUOT;") == "& QUOT ;");
  CHECK(t13a("it&apos;s") == "it & apos ; s");
}

TEST_CASE("13a splits its ASCII symbol set but not apostrophe, hyphen or non-ASCII", "[tokenizer][13a]") {
  CHECK(t13a("a{b|c}d~e[f\\g]h^i_j`k") == "a { b | c } d ~ e [ f \\ g ] h ^ i _ j ` k");
  CHECK(t13a("a!b\"c#d$e%f&g(h)i*j+k:l;m<n=o>p?q@r/s") ==
        "a ! b \" c # d $ e % f & g ( h ) i * j + k : l ; m < n = o > p ? q @ r / s");
  CHECK(t13a("don't well-known") == "don't well-known");
  CHECK(t13a("\xE2\x80\x9CHallo\xE2\x80\x9D") == "\xE2\x80\x9CHallo\xE2\x80\x9D");
}

TEST_CASE("13a separates . and , after a non-digit with a consuming scan", "[tokenizer][13a]") {
  CHECK(t13a("a.,5") == "a . ,5");
  CHECK(t13a("end.") == "end .");
  CHECK(t13a("x, y") == "x , y");
}

TEST_CASE("13a keeps numbers whole but splits a final period thanks to the padding", "[tokenizer][13a]") {
  CHECK(t13a("1,000.5 and 3.14") == "1,000.5 and 3.14");
  CHECK(t13a("year 2019.") == "year 2019 .");
  CHECK(t13a("5. x") == "5 . x");
}

TEST_CASE("13a splits a hyphen after a digit only", "[tokenizer][13a]") {
  CHECK(t13a("5-6") == "5 - 6");
  CHECK(t13a("12-B") == "12 - B");
  CHECK(t13a("-5 a-b") == "-5 a-b");
}

TEST_CASE("13a joins tokens on Python's Unicode whitespace", "[tokenizer][13a]") {
  CHECK(t13a("a\xC2\xA0" "b\xE3\x80\x80" "c") == "a b c");      // NBSP, ideographic space
  CHECK(t13a("a\xE2\x80\x8B" "b") == "a\xE2\x80\x8B" "b");  // U+200B is not whitespace
}

TEST_CASE("intl splits punctuation next to non-digits and every symbol", "[tokenizer][intl]") {
  CHECK(intl("well-known") == "well - known");
  CHECK(intl("year 2019.") == "year 2019.");  // no padding: the final '.' follows a digit
  CHECK(intl("it's") == "it ' s");
  CHECK(intl("3.14") == "3.14");
  CHECK(intl("a+b") == "a + b");
  CHECK(intl("5\xE2\x82\xAC") == "5 \xE2\x82\xAC");  // € is Sc
  CHECK(intl("&amp;") == "& amp ;");              // no entity un-escaping
}

TEST_CASE("zh spaces Chinese characters and reproduces sacreBLEU's range bug", "[tokenizer][zh]") {
  CHECK(zh("\xE6\x88\x91\xE4\xBB\xAC") == "\xE6\x88\x91 \xE4\xBB\xAC");  // 我们
  // U+201C/U+201D (inside the buggy U+2001..U+2A6D range) are split off; U+20000 (Extension B) is not.
  CHECK(zh("\xE2\x80\x9C" "a\xE2\x80\x9D") == "\xE2\x80\x9C a \xE2\x80\x9D");
  CHECK(zh("a\xF0\xA0\x80\x80" "b") == "a\xF0\xA0\x80\x80" "b");
  CHECK(parla::metrics::is_zh_tokenizer_char(0x2001));
  CHECK_FALSE(parla::metrics::is_zh_tokenizer_char(0x2000));
  CHECK_FALSE(parla::metrics::is_zh_tokenizer_char(0x20000));
  CHECK(zh("2019.") == "2019.");  // no padding, so a final '.' after a digit stays
  CHECK(zh("&amp;") == "& amp ;");
}

TEST_CASE("char makes every code point a token and drops whitespace", "[tokenizer][char]") {
  CHECK(tokenize(TokenizerKind::kChar, "ab c") == "a b c");
  CHECK(tokenize(TokenizerKind::kChar, "e\xCC\x81") == "e \xCC\x81");  // a combining mark is its own token
}

TEST_CASE("none only normalises whitespace", "[tokenizer][none]") {
  CHECK(tokenize(TokenizerKind::kNone, "  a,b.  c ") == "a,b. c");
}

TEST_CASE("every tokenizer matches sacreBLEU on all lines of tokenization.jsonl", "[tokenizer][fixtures]") {
  if (!parla::testing::have_bleu_fixtures()) {
    WARN("../shared/bleu is absent; skipping");
    return;
  }
  auto records = parla::testing::read_jsonl("tokenization.jsonl");
  REQUIRE(records.size() == 1010);
  const std::pair<const char*, TokenizerKind> kinds[] = {{"13a", TokenizerKind::k13a},
                                                         {"none", TokenizerKind::kNone},
                                                         {"intl", TokenizerKind::kIntl},
                                                         {"char", TokenizerKind::kChar},
                                                         {"zh", TokenizerKind::kZh}};
  int failures = 0;
  std::size_t checked = 0;
  for (const auto& rec : records) {
    std::string input = rec["input"];
    std::string lowered = rec["lower"];
    // The lowercasing itself must be Python's str.lower().
    if (parla::text::lower(input) != lowered) {
      if (++failures < 10) FAIL_CHECK("lower() differs on " << rec["case"] << ":" << rec["line_no"]);
    }
    for (const auto& [name, kind] : kinds) {
      for (int lc = 0; lc < 2; ++lc) {
        const auto& expected_tokens = rec[lc ? "tokens_lc" : "tokens"][name];
        std::string expected;
        for (std::size_t i = 0; i < expected_tokens.size(); ++i) {
          if (i) expected += ' ';
          expected += expected_tokens[i].get<std::string>();
        }
        // As sacreBLEU: tokenizer((line.lower() if lc else line).rstrip())
        std::string line = lc ? parla::text::lower(input) : input;
        std::string got = tokenize(kind, parla::text::rstrip(line));
        ++checked;
        if (got != expected && ++failures < 20)
          FAIL_CHECK(name << (lc ? " -lc" : "") << " differs on " << rec["case"] << ":" << rec["line_no"]
                          << "\n  input:    " << input << "\n  expected: " << expected << "\n  got:      " << got);
      }
    }
  }
  CHECK(checked == 1010u * 10u);
  CHECK(failures == 0);
}

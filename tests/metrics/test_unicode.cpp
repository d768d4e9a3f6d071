// text/unicode: UTF-8 handling and Python's str semantics (isspace, split, strip, lower, general category).
#include <catch2/catch.hpp>

#include <algorithm>

#include "text/unicode.h"

using namespace parla::text;

TEST_CASE("is_space is exactly Python's str.isspace", "[unicode]") {
  // The list published in shared/bleu/README.md (Python 3.11).
  const char32_t spaces[] = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x1F, 0x20, 0x85, 0xA0, 0x1680,
                             0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009,
                             0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  int count = 0;
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    bool expected = std::find(std::begin(spaces), std::end(spaces), cp) != std::end(spaces);
    if (is_space(cp) != expected) FAIL_CHECK("code point " << static_cast<uint32_t>(cp));
    count += is_space(cp);
  }
  CHECK(count == 29);
  CHECK_FALSE(is_space(0x200B));
  CHECK_FALSE(is_space(0xFEFF));
  CHECK_FALSE(is_space(0x180E));
}

TEST_CASE("UTF-8 validation rejects what Python's strict decoder rejects", "[unicode]") {
  CHECK(is_valid_utf8("plain ascii"));
  CHECK(is_valid_utf8("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));
  CHECK(find_invalid_utf8("ab\xFF") == 2);
  CHECK(find_invalid_utf8("\xC0\xAF") == 0);          // overlong '/'
  CHECK(find_invalid_utf8("x\xED\xA0\x80") == 1);     // surrogate U+D800
  CHECK(find_invalid_utf8("\xF4\x90\x80\x80") == 0);  // above U+10FFFF
  CHECK(find_invalid_utf8("\xE2\x82") == 0);          // truncated
  CHECK(find_invalid_utf8("a\x80") == 1);             // lone continuation byte
}

TEST_CASE("UTF-8 round-trips every scalar value", "[unicode]") {
  for (char32_t cp = 0; cp <= 0x10FFFF; cp += (cp < 0x3000 ? 1 : 97)) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s;
    append_utf8(s, cp);
    REQUIRE(is_valid_utf8(s));
    std::size_t i = 0;
    REQUIRE(decode_utf8(s, i) == cp);
    REQUIRE(i == s.size());
  }
}

TEST_CASE("split, strip and rstrip use Unicode whitespace like Python", "[unicode]") {
  std::vector<std::string_view> tokens;
  split_whitespace("  a\tb\xC2\xA0" "c\xE2\x80\x8B" "d  ", tokens);
  REQUIRE(tokens.size() == 3);
  CHECK(tokens[0] == "a");
  CHECK(tokens[1] == "b");
  CHECK(tokens[2] == "c\xE2\x80\x8B" "d");
  CHECK(rstrip("x \r\xE3\x80\x80") == "x");
  CHECK(strip("\xC2\x85 x y \t") == "x y");
  CHECK(rstrip("\xEF\xBB\xBF") == "\xEF\xBB\xBF");  // a BOM is not whitespace
}

TEST_CASE("lower is Python's full str.lower", "[unicode]") {
  CHECK(lower("ABC xyz") == "abc xyz");
  CHECK(lower("\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3") == "\xCE\xBF\xCE\xB4\xCE\xBF\xCF\x82");  // ΟΔΟΣ -> οδος (final ς)
  CHECK(lower("\xCE\xA3\xCE\x91") == "\xCF\x83\xCE\xB1");                                // ΣΑ -> σα
  CHECK(lower("A\xCE\xA3" "B") == "a\xCF\x83" "b");                                       // medial σ
  CHECK(lower("\xC4\xB0") == "i\xCC\x87");                                                // İ -> i + U+0307
  CHECK(lower("\xE1\xBA\x9E") == "\xC3\x9F");                                             // ẞ -> ß
  CHECK(lower("\xC7\x85") == "\xC7\x86");                                                 // ǅ -> ǆ
  CHECK(lower("\xF0\x90\x90\x80") == "\xF0\x90\x90\xA8");                                 // Deseret
  CHECK(lower("\xEF\xBC\xA1") == "\xEF\xBD\x81");                                         // full-width A
}

TEST_CASE("general categories follow unicodedata", "[unicode]") {
  CHECK(general_category('a') == GeneralCategory::Ll);
  CHECK(general_category('A') == GeneralCategory::Lu);
  CHECK(general_category('5') == GeneralCategory::Nd);
  CHECK(general_category('-') == GeneralCategory::Pd);
  CHECK(general_category(0x20AC) == GeneralCategory::Sc);   // €
  CHECK(general_category(0x00B2) == GeneralCategory::No);   // ²
  CHECK(general_category(0x1F600) == GeneralCategory::So);  // 😀
  CHECK(general_category(0x0301) == GeneralCategory::Mn);
  CHECK(general_category(0x4E00) == GeneralCategory::Lo);
  CHECK(general_category(0xE000) == GeneralCategory::Co);
  CHECK(general_category(0x0378) == GeneralCategory::Cn);   // unassigned
  CHECK(is_punctuation(0x3002));                            // 。
  CHECK(is_symbol('+'));
  CHECK(is_number(0x0663));                                 // Arabic-Indic three
  CHECK_FALSE(is_number('a'));
}

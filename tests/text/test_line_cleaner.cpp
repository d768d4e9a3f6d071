#include <catch2/catch.hpp>

#include "text/line_cleaner.h"
#include "text/normalization_form.h"

using parla::CleanConfig;
using parla::text::count_tokens;
using parla::text::is_valid_utf8;
using parla::text::LineCleaner;
using parla::text::LineEdits;

namespace {
std::string cleaned(const std::string& in, const CleanConfig& c = {}, LineEdits* e = nullptr) {
  std::string out;
  REQUIRE(LineCleaner(c).clean(in, out, e));
  return out;
}
}  // namespace

TEST_CASE("utf8: well-formed UTF-8 of every sequence length is accepted") {
  CHECK(is_valid_utf8(""));
  CHECK(is_valid_utf8("plain ASCII"));
  CHECK(is_valid_utf8("\xC3\xA9"));              // é (2 bytes)
  CHECK(is_valid_utf8("\xE2\x82\xAC"));          // € (3 bytes)
  CHECK(is_valid_utf8("\xF0\x9D\x84\x9E"));      // U+1D11E (4 bytes)
  CHECK(is_valid_utf8("\xF4\x8F\xBF\xBF"));      // U+10FFFF, the last code point
  CHECK(is_valid_utf8("\xEF\xBB\xBF" "BOM"));
}

TEST_CASE("utf8: malformed sequences of RFC 3629 are rejected") {
  CHECK_FALSE(is_valid_utf8("\x80"));                  // lone continuation byte
  CHECK_FALSE(is_valid_utf8("abc\xC3"));               // truncated 2-byte sequence
  CHECK_FALSE(is_valid_utf8("\xE2\x82"));              // truncated 3-byte sequence
  CHECK_FALSE(is_valid_utf8("\xC0\xAF"));              // overlong '/'
  CHECK_FALSE(is_valid_utf8("\xE0\x80\xAF"));          // overlong '/' (3 bytes)
  CHECK_FALSE(is_valid_utf8("\xF0\x80\x80\xAF"));      // overlong '/' (4 bytes)
  CHECK_FALSE(is_valid_utf8("\xED\xA0\x80"));          // UTF-16 surrogate U+D800
  CHECK_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));      // U+110000
  CHECK_FALSE(is_valid_utf8("\xFF"));
  CHECK_FALSE(is_valid_utf8("caf\xE9"));               // latin-1 é
  std::string out;
  CHECK_FALSE(LineCleaner(CleanConfig{}).clean("caf\xE9", out));
}

TEST_CASE("cleaning strips and collapses every kind of Unicode whitespace to one space") {
  LineEdits e;
  // tab, no-break space U+00A0, ideographic space U+3000, em space U+2003
  CHECK(cleaned("  a \t b\xC2\xA0" "c\xE3\x80\x80  d\xE2\x80\x83 ", {}, &e) == "a b c d");
  CHECK(e.whitespace);
  CHECK(cleaned("already clean", {}, &e) == "already clean");
  CHECK_FALSE(e.whitespace);
  CleanConfig off;
  off.normalize_whitespace = false;
  off.remove_control = false;
  CHECK(cleaned("  a  b ", off) == "  a  b ");
}

TEST_CASE("cleaning deletes control characters and turns control whitespace into a space") {
  LineEdits e;
  CleanConfig c;
  c.normalize_whitespace = false;
  // U+0001 and DEL are deleted; tab, CR and NEL (U+0085) become spaces; BOM is deleted
  CHECK(cleaned("\xEF\xBB\xBF" "a\x01" "b\x7F" "c\td\re\xC2\x85" "f", c, &e) == "abc d e f");
  CHECK(e.control);
  CHECK(cleaned("a\x01" "b  c", {}, &e) == "ab c");
  CHECK(e.control);
  CHECK(e.whitespace);
  c.remove_control = false;
  CHECK(cleaned("a\x01" "b", c) == "a\x01" "b");
}

TEST_CASE("optional Unicode normalisation: NFC composes, NFKC also folds compatibility characters") {
  CleanConfig c;
  LineEdits e;
  CHECK(cleaned("Cafe\xCC\x81", c, &e) == "Cafe\xCC\x81");  // none: untouched
  CHECK_FALSE(e.unicode);
  c.unicode_normalization = parla::UnicodeNormalization::kNfc;
  CHECK(cleaned("Cafe\xCC\x81", c, &e) == "Caf\xC3\xA9");   // e + U+0301 -> é (UAX #15)
  CHECK(e.unicode);
  CHECK(cleaned("\xEF\xAC\x81", c) == "\xEF\xAC\x81");       // NFC keeps the ligature fi
  c.unicode_normalization = parla::UnicodeNormalization::kNfkc;
  CHECK(cleaned("\xEF\xAC\x81" "ne\xE2\x80\xA6", c) == "fine...");  // ﬁ -> fi, … -> ...
  CHECK(cleaned("x\xC2\xB2", c) == "x2");                             // superscript two
  // NFKC turns a no-break space into a space, which whitespace normalisation then collapses.
  CHECK(cleaned("a \xC2\xA0 b", c) == "a b");
}

TEST_CASE("tokens are counted as runs of non-whitespace") {
  CHECK(count_tokens("") == 0);
  CHECK(count_tokens("one") == 1);
  CHECK(count_tokens("  two  words ") == 2);
  CHECK(count_tokens("a\xC2\xA0" "b\tc") == 3);
}

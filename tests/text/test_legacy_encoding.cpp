#include <catch2/catch.hpp>

#include "text/legacy_encoding.h"

using parla::text::cp1252_to_utf8;
using parla::text::decode_text_lines;
using parla::text::TextDecoding;

TEST_CASE("cp1252 bytes become the code points of the published cp1252 table, in UTF-8") {
  // Reference: the Windows-1252 code page chart (0x80 euro sign, 0x93/0x94 curly double quotes, 0x96 en dash,
  // 0xE9 e acute as in latin-1; 0x81 is unassigned and keeps its latin-1 value).
  CHECK(cp1252_to_utf8("\x80") == "\xE2\x82\xAC");
  CHECK(cp1252_to_utf8("\x93x\x94") == "\xE2\x80\x9Cx\xE2\x80\x9D");
  CHECK(cp1252_to_utf8("\x96") == "\xE2\x80\x93");
  CHECK(cp1252_to_utf8("caf\xE9") == "caf\xC3\xA9");
  CHECK(cp1252_to_utf8("\xFF") == "\xC3\xBF");
  CHECK(cp1252_to_utf8("\x81") == "\xC2\x81");
  CHECK(cp1252_to_utf8("plain ascii") == "plain ascii");
}

TEST_CASE("lines: a byte-order mark and CR LF ends are dropped, UTF-8 lines kept, other lines converted") {
  TextDecoding report;
  auto lines = decode_text_lines("\xEF\xBB\xBFr\xC3\xA9sum\xC3\xA9\r\nd\xE9j\xE0\nlast", report);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "r\xC3\xA9sum\xC3\xA9");
  CHECK(lines[1] == "d\xC3\xA9j\xC3\xA0");
  CHECK(lines[2] == "last");
  CHECK(report.byte_order_mark);
  CHECK(report.lines == 3);
  CHECK(report.crlf_lines == 1);
  CHECK(report.converted_lines == 1);
  CHECK(report.first_converted_line == 2);
}

TEST_CASE("lines: an empty input has no lines, a lone newline one empty line, no report") {
  TextDecoding empty, newline;
  CHECK(decode_text_lines("", empty).empty());
  CHECK(empty.lines == 0);
  auto one = decode_text_lines("\n", newline);
  REQUIRE(one.size() == 1);
  CHECK(one[0].empty());
  CHECK_FALSE(newline.byte_order_mark);
  CHECK(newline.converted_lines == 0);
}

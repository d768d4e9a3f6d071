#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "decode/input_sanitizer.h"

using namespace parla::decode;

static const std::string R = "\xEF\xBF\xBD";  // U+FFFD

TEST_CASE("ill-formed UTF-8 is replaced per maximal subpart, as in the Unicode standard's example",
          "[input_sanitizer]") {
  // The Unicode Standard 15.0, section 3.9, Table 3-11: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64
  // becomes a U+FFFD U+FFFD U+FFFD b U+FFFD c U+FFFD U+FFFD d.
  auto out = sanitize_line("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64");
  CHECK(out.text == "a" + R + R + R + "b" + R + "c" + R + R + "d");
  CHECK(out.invalid_utf8 == 6);
  // Table 3-8: C0 AF E0 80 BF F0 81 82 41 (overlongs): every byte is its own maximal subpart.
  auto overlong = sanitize_line("\xC0\xAF\xE0\x80\xBF\xF0\x81\x82\x41");
  CHECK(overlong.text == R + R + R + R + R + R + R + R + "A");
  // Table 3-9: ED A0 80 ED BF BF ED AF 41 (surrogates).
  auto surrogate = sanitize_line("\xED\xA0\x80\xED\xBF\xBF\xED\xAF\x41");
  CHECK(surrogate.text == R + R + R + R + R + R + R + R + "A");
  // Table 3-10: F4 91 92 93 FF 41 80 BF 42 (beyond U+10FFFF, invalid bytes).
  auto high = sanitize_line("\xF4\x91\x92\x93\xFF\x41\x80\xBF\x42");
  CHECK(high.text == R + R + R + R + R + "A" + R + R + "B");
}

TEST_CASE("well-formed UTF-8 passes unchanged", "[input_sanitizer]") {
  std::string s = "Gr\xC3\xBC\xC3\x9F" "e \xE2\x82\xAC \xF0\x9F\x98\x80 \xE4\xB8\xAD\tend";
  auto out = sanitize_line(s);
  CHECK(out.text == s);
  CHECK(out.invalid_utf8 == 0);
  CHECK(out.control_chars == 0);
  CHECK(is_valid_utf8(s));
  CHECK_FALSE(is_valid_utf8("\xC3"));
  CHECK_FALSE(is_valid_utf8("\xED\xA0\x80"));
  CHECK(is_valid_utf8("\xF4\x8F\xBF\xBF"));  // U+10FFFF
}

TEST_CASE("control characters become spaces and a trailing CR is dropped", "[input_sanitizer]") {
  auto out = sanitize_line(std::string("a\0b\x0B" "c\x7F\r", 7));
  CHECK(out.text == "a b c ");
  CHECK(out.control_chars == 3);
  CHECK(sanitize_line("").text.empty());
  CHECK(sanitize_line("\r").text.empty());
}

TEST_CASE("the line reader returns exactly one line per newline plus an unterminated last line",
          "[input_sanitizer]") {
  auto count = [](const std::string& s) {
    std::istringstream in(s);
    LineReader r(in);
    std::string line;
    std::vector<std::string> lines;
    while (r.next(line)) lines.push_back(line);
    return lines;
  };
  CHECK(count("").empty());
  CHECK(count("\n") == std::vector<std::string>{""});
  CHECK(count("a\n\nb") == std::vector<std::string>{"a", "", "b"});
  CHECK(count("a\n\nb\n") == std::vector<std::string>{"a", "", "b"});
  CHECK(count(std::string("x\0y\n", 4)) == std::vector<std::string>{std::string("x\0y", 3)});
}

TEST_CASE("the line reader cuts a long line to its character budget and reports the cut", "[input_sanitizer]") {
  // A 1 MB line between two short ones: the reader keeps 10 characters of it and reads on to the next line.
  const std::string long_line(1 << 20, 'x');
  std::istringstream in("first\n" + long_line + "\nlast");
  LineReader r(in, 10);
  std::string line;
  REQUIRE(r.next(line));
  CHECK(line == "first");
  CHECK_FALSE(r.cut());
  CHECK(r.line_bytes() == 5);
  REQUIRE(r.next(line));
  CHECK(line == std::string(10, 'x'));
  CHECK(r.cut());
  CHECK(r.line_bytes() == long_line.size());
  CHECK(r.line_number() == 2);
  // The cut line's buffer grew no further than the budget: nothing beyond it was held.
  CHECK(line.capacity() < 1024);
  REQUIRE(r.next(line));
  CHECK(line == "last");
  CHECK_FALSE(r.cut());
  CHECK_FALSE(r.next(line));
  CHECK(r.line_number() == 3);
}

TEST_CASE("the character budget counts code points and never splits a UTF-8 sequence", "[input_sanitizer]") {
  const std::string euro = "\xE2\x82\xAC";  // 3 bytes, 1 character
  const std::string line = "a" + euro + euro + "b";
  CHECK(kept_bytes(line, 4) == line.size());  // exactly 4 characters fit
  CHECK(kept_bytes(line, 3) == 7);            // a, two euro signs: whole sequences only
  CHECK(kept_bytes(line, 2) == 4);
  CHECK(kept_bytes(line, 0) == 0);
  CHECK(kept_bytes(line, CharBudget::kUnlimited) == line.size());
  // Stray continuation bytes count no character but at most 4 bytes per character of the budget.
  CHECK(kept_bytes(std::string(100, '\x80'), 5) == 20);
  // The reader applies the same rule as kept_bytes.
  std::istringstream in(line + "\n");
  LineReader r(in, 3);
  std::string got;
  REQUIRE(r.next(got));
  CHECK(got == line.substr(0, 7));
  CHECK(r.cut());
  CHECK(is_valid_utf8(got));
}

TEST_CASE("a budget that a line fits leaves it unchanged, and a read error ends the input", "[input_sanitizer]") {
  std::istringstream in("exactly ten\n");
  LineReader r(in, 11);
  std::string line;
  REQUIRE(r.next(line));
  CHECK(line == "exactly ten");
  CHECK_FALSE(r.cut());

  std::ifstream dir("/", std::ios::binary);  // opens; reading fails with EISDIR
  LineReader d(dir);
  CHECK_FALSE(d.next(line));
  CHECK(dir.bad());
}

#pragma once
// What parla-translate does to a raw input line before SentencePiece sees it. Torch-free, so the fuzz target
// (fuzz/) can build it alone with clang's libFuzzer. The contract (issue 6): one output line per input line,
// whatever the bytes: nothing here throws on any input, and no byte sequence can merge or split lines.
#include <cstddef>
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace parla::decode {

struct SanitizedLine {
  std::string text;          // valid UTF-8, no control characters besides tab
  size_t invalid_utf8 = 0;   // ill-formed byte sequences replaced with U+FFFD
  size_t control_chars = 0;  // C0/DEL control characters (NUL, VT, ...) replaced with a space
};

// Makes one line safe to encode: a trailing CR (Windows line ends) is dropped, every maximal ill-formed UTF-8
// subsequence becomes U+FFFD (Unicode 15, section 3.9 "U+FFFD substitution of maximal subparts", the policy of
// ICU and WHATWG), and control characters become spaces so that SentencePiece never sees them.
SanitizedLine sanitize_line(const std::string& raw);

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool is_valid_utf8(const std::string& s);

// Reads lines split on '\n' only (a final line without '\n' counts; an empty stream has no lines), so the
// line count always equals what `wc -l` plus an unterminated last line would say.
class LineReader {
 public:
  explicit LineReader(std::istream& in) : in_(in) {}
  // Reads the next raw line into `line`; false at end of input.
  bool next(std::string& line);
  // 1-based number of the line last returned.
  uint64_t line_number() const { return line_number_; }

 private:
  std::istream& in_;
  uint64_t line_number_ = 0;
};

}  // namespace parla::decode

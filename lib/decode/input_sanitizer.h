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

// A line's length as the reader and the translator's cut count it: characters are the bytes that do not continue
// a UTF-8 sequence (0x80-0xBF), i.e. the code points of well-formed UTF-8; every byte of ill-formed input counts
// at most once. A budget of C characters also keeps at most 4 * C bytes, so a run of stray continuation bytes is
// bounded too. A cut falls on a character boundary, so it never splits a well-formed sequence.
class CharBudget {
 public:
  static constexpr size_t kUnlimited = static_cast<size_t>(-1);
  explicit CharBudget(size_t max_chars)
      : max_chars_(max_chars), max_bytes_(max_chars > kUnlimited / 4 ? kUnlimited : 4 * max_chars) {}
  // True when byte `b` still fits (and counts it); false from the first byte that does not on.
  bool admit(unsigned char b) {
    const bool starts = (b & 0xC0) != 0x80;
    if (bytes_ == max_bytes_ || (starts && chars_ == max_chars_)) return false;
    chars_ += starts;
    ++bytes_;
    return true;
  }

 private:
  size_t max_chars_, max_bytes_, chars_ = 0, bytes_ = 0;
};

// How many leading bytes of `line` a budget of `max_chars` characters keeps (CharBudget's rule): line.size()
// when the whole line fits.
size_t kept_bytes(const std::string& line, size_t max_chars);
// The warning for a line of `bytes` bytes cut to `max_chars` characters, naming `where` ("input line 7") and
// decoding.max_input_chars.
std::string cut_chars_warning(const std::string& where, uint64_t bytes, size_t max_chars);

// Reads lines split on '\n' only (a final line without '\n' counts; an empty stream has no lines), so the
// line count always equals what `wc -l` plus an unterminated last line would say. Each line is cut to
// `max_chars` characters (CharBudget) as it is read: the rest of a longer line is read and dropped without being
// held, so a 50 MB line costs no more memory than the budget.
class LineReader {
 public:
  explicit LineReader(std::istream& in, size_t max_chars = CharBudget::kUnlimited)
      : in_(in), max_chars_(max_chars) {}
  // Reads the next raw line (cut to the budget) into `line`; false at end of input. A read error of the
  // stream ends the input too, with the stream's badbit set (the caller reports it).
  bool next(std::string& line);
  // 1-based number of the line last returned.
  uint64_t line_number() const { return line_number_; }
  // Whether the line last returned was cut, and how many bytes it had before the cut (without the '\n').
  bool cut() const { return cut_; }
  uint64_t line_bytes() const { return line_bytes_; }

 private:
  std::istream& in_;
  size_t max_chars_;
  uint64_t line_number_ = 0;
  uint64_t line_bytes_ = 0;
  bool cut_ = false;
};

}  // namespace parla::decode

#include "decode/input_sanitizer.h"

namespace parla::decode {
namespace {

const char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 with `bad` = length of the maximal
// ill-formed subpart to replace (Unicode Table 3-7: the allowed second-byte ranges exclude overlongs,
// surrogates and code points above U+10FFFF).
size_t utf8_sequence(const std::string& s, size_t i, size_t& bad) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  bad = 1;
  if (c < 0x80) return 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) return 0;
    unsigned char d = b(i + k);
    unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (d < l || d > h) return 0;
    bad = k + 1;  // the maximal subpart grows while continuation bytes are valid
  }
  return need + 1;
}

}  // namespace

bool is_valid_utf8(const std::string& s) {
  size_t bad = 0;
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence(s, i, bad);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

SanitizedLine sanitize_line(const std::string& raw) {
  SanitizedLine out;
  size_t end = raw.size();
  if (end > 0 && raw[end - 1] == '\r') --end;
  std::string s = raw.substr(0, end);
  out.text.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t bad = 0;
    size_t n = utf8_sequence(s, i, bad);
    if (n == 0) {
      out.text += kReplacement;
      ++out.invalid_utf8;
      i += bad;
      continue;
    }
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (n == 1 && ((c < 0x20 && c != '\t') || c == 0x7F)) {
      out.text += ' ';
      ++out.control_chars;
    } else {
      out.text.append(s, i, n);
    }
    i += n;
  }
  return out;
}

size_t kept_bytes(const std::string& line, size_t max_chars) {
  CharBudget budget(max_chars);
  size_t n = 0;
  while (n < line.size() && budget.admit(static_cast<unsigned char>(line[n]))) ++n;
  return n;
}

std::string cut_chars_warning(const std::string& where, uint64_t bytes, size_t max_chars) {
  return where + ": " + std::to_string(bytes) + " bytes, longer than the limit of " + std::to_string(max_chars) +
         " characters (decoding.max_input_chars); cut before tokenizing";
}

bool LineReader::next(std::string& line) {
  line.clear();
  cut_ = false;
  line_bytes_ = 0;
  std::streambuf* buf = in_.rdbuf();
  if (!buf || !in_.good()) return false;
  // Byte by byte from the stream buffer (inline while its buffer holds data): reading a block ahead could block
  // an interactive reader waiting for more input, and std::getline would hold the whole line.
  CharBudget budget(max_chars_);
  bool any = false;
  try {
    for (int c = buf->sbumpc();; c = buf->sbumpc()) {
      if (c == std::char_traits<char>::eof()) {
        in_.setstate(any ? std::ios::eofbit : std::ios::eofbit | std::ios::failbit);
        break;
      }
      any = true;
      if (c == '\n') break;
      ++line_bytes_;
      if (!cut_ && budget.admit(static_cast<unsigned char>(c)))
        line.push_back(static_cast<char>(c));
      else
        cut_ = true;
    }
  } catch (...) {
    // A failing read (std::filebuf throws on EIO or EISDIR) ends the input, as it would inside std::getline.
    in_.setstate(std::ios::badbit);
    return false;
  }
  if (!any) return false;
  ++line_number_;
  return true;
}

}  // namespace parla::decode

// The 13a tokenizer (sacrebleu/tokenizers/tokenizer_13a.py and tokenizer_re.py), the tokenization of NIST's
// mteval-v13a.pl that WMT reports BLEU with. The regular expressions only involve ASCII characters, so they run
// on UTF-8 bytes: a multi-byte character can never be a digit, '.', ',' or '-', and a match never starts in the
// middle of one, so the byte scan makes the same matches as Python's code-point scan.
#include <string>

#include "metrics/tokenizer.h"

namespace parla::metrics {

namespace {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

// [\{-\~\[-\` -\&\(-\+\:-\@\/]: ASCII punctuation and symbols except ' - . , and the digits.
inline bool is_13a_symbol(char c) {
  auto u = static_cast<unsigned char>(c);
  return (u >= 0x7B && u <= 0x7E) || (u >= 0x5B && u <= 0x60) || (u >= 0x20 && u <= 0x26) ||
         (u >= 0x28 && u <= 0x2B) || (u >= 0x3A && u <= 0x40) || u == '/';
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::size_t pos = 0;
  std::string out;
  bool changed = false;
  while (true) {
    std::size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    if (!changed) out.reserve(s.size());
    changed = true;
    out.append(s, pos, hit - pos);
    out.append(to);
    pos = hit + from.size();
  }
  if (!changed) return;
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

}  // namespace

void apply_mteval_regexes(std::string_view line, std::string& out) {
  thread_local std::string a, b, c;
  // a. ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> " \1 "
  a.clear();
  a.reserve(line.size() * 2);
  for (char ch : line) {
    if (is_13a_symbol(ch)) {
      a += ' ';
      a += ch;
      a += ' ';
    } else {
      a += ch;
    }
  }
  // b. ([^0-9])([\.,]) -> "\1 \2 "   (the match consumes both characters)
  b.clear();
  b.reserve(a.size() + 16);
  for (std::size_t i = 0; i < a.size();) {
    if (!is_digit(a[i]) && i + 1 < a.size() && (a[i + 1] == '.' || a[i + 1] == ',')) {
      b += a[i];
      b += ' ';
      b += a[i + 1];
      b += ' ';
      i += 2;
    } else {
      b += a[i++];
    }
  }
  // c. ([\.,])([^0-9]) -> " \1 \2"
  c.clear();
  c.reserve(b.size() + 16);
  for (std::size_t i = 0; i < b.size();) {
    if ((b[i] == '.' || b[i] == ',') && i + 1 < b.size() && !is_digit(b[i + 1])) {
      c += ' ';
      c += b[i];
      c += ' ';
      c += b[i + 1];
      i += 2;
    } else {
      c += b[i++];
    }
  }
  // d. ([0-9])(-) -> "\1 \2 "
  a.clear();
  for (std::size_t i = 0; i < c.size();) {
    if (is_digit(c[i]) && i + 1 < c.size() && c[i + 1] == '-') {
      a += c[i];
      a += ' ';
      a += '-';
      a += ' ';
      i += 2;
    } else {
      a += c[i++];
    }
  }
  normalize_whitespace(a, out);
}

void tokenize_13a(std::string_view line, std::string& out) {
  thread_local std::string s;
  s.assign(line);
  // Language-independent mteval-v13a preprocessing: drop <skipped>, join hyphenated line breaks.
  replace_all(s, "<skipped>", "");
  replace_all(s, "-\n", "");
  replace_all(s, "\n", " ");
  // Un-escape four XML entities, only when an '&' is present, in this order (so "&amp;lt;" becomes "<").
  if (s.find('&') != std::string::npos) {
    replace_all(s, "&quot;", "\"");
    replace_all(s, "&amp;", "&");
    replace_all(s, "&lt;", "<");
    replace_all(s, "&gt;", ">");
  }
  // Pad with one space each side, so that a final '.' or ',' is followed by a non-digit (rule c).
  s.insert(s.begin(), ' ');
  s += ' ';
  apply_mteval_regexes(s, out);
}

}  // namespace parla::metrics

// The intl tokenizer (sacrebleu/tokenizers/tokenizer_intl.py, mteval-v14's international tokenization): splits
// punctuation next to non-digits and every symbol, using Unicode general categories (\p{N}, \p{P}, \p{S}).
#include <string>

#include "metrics/tokenizer.h"
#include "text/unicode.h"

namespace parla::metrics {

void tokenize_intl(std::string_view line, std::string& out) {
  thread_local std::u32string s, t;
  s.clear();
  for (std::size_t i = 0; i < line.size();) s += text::decode_utf8(line, i);
  // 1. (\P{N})(\p{P}) -> "\1 \2 "   (non-overlapping, both characters consumed)
  t.clear();
  for (std::size_t i = 0; i < s.size();) {
    if (i + 1 < s.size() && !text::is_number(s[i]) && text::is_punctuation(s[i + 1])) {
      t += s[i];
      t += U' ';
      t += s[i + 1];
      t += U' ';
      i += 2;
    } else {
      t += s[i++];
    }
  }
  // 2. (\p{P})(\P{N}) -> " \1 \2"
  s.clear();
  for (std::size_t i = 0; i < t.size();) {
    if (i + 1 < t.size() && text::is_punctuation(t[i]) && !text::is_number(t[i + 1])) {
      s += U' ';
      s += t[i];
      s += U' ';
      s += t[i + 1];
      i += 2;
    } else {
      s += t[i++];
    }
  }
  // 3. (\p{S}) -> " \1 "
  t.clear();
  for (char32_t c : s) {
    if (text::is_symbol(c)) {
      t += U' ';
      t += c;
      t += U' ';
    } else {
      t += c;
    }
  }
  thread_local std::string utf8;
  utf8.clear();
  for (char32_t c : t) text::append_utf8(utf8, c);
  normalize_whitespace(utf8, out);
}

}  // namespace parla::metrics

// The char tokenizer (sacrebleu/tokenizers/tokenizer_char.py): " ".join(line), so every code point (not grapheme
// cluster, not byte) is a token; whitespace code points vanish in the later whitespace split.
#include <string>

#include "metrics/tokenizer.h"
#include "text/unicode.h"

namespace parla::metrics {

void tokenize_char(std::string_view line, std::string& out) {
  out.clear();
  out.reserve(line.size() * 2);
  for (std::size_t i = 0; i < line.size();) {
    std::size_t start = i;
    char32_t cp = text::decode_utf8(line, i);
    if (text::is_space(cp)) continue;
    if (!out.empty()) out += ' ';
    out.append(line.substr(start, i - start));
  }
}

}  // namespace parla::metrics

// The zh tokenizer (sacrebleu/tokenizers/tokenizer_zh.py): spaces around every Chinese character, then the
// mteval-v13a regular expressions without 13a's entity handling and padding.
#include <string>

#include "metrics/tokenizer.h"
#include "text/unicode.h"

namespace parla::metrics {

namespace {

// sacreBLEU's _UCODE_RANGES as Python actually evaluates them. Two entries of the original table are written as
// five-hex-digit escapes ('\u20000', '\u2f800'), which Python reads as a four-digit escape plus a '0'; compared as
// strings, ('\u20000', '\u2a6d6') then accepts U+2001..U+2A6D and the CJK Extension B/compatibility supplement
// ranges are never matched. sacreBLEU's scores include this behaviour, so it is reproduced.
struct Range {
  char32_t first, last;
};
constexpr Range kZhRanges[] = {
    {0x2001, 0x2A6D}, {0x2E80, 0x2FDF}, {0x2FF0, 0x303F}, {0x3100, 0x312F}, {0x31A0, 0x31EF},
    {0x3200, 0x4DB5}, {0x4E00, 0x9FBB}, {0xF900, 0xFA2D}, {0xFA30, 0xFA6A}, {0xFA70, 0xFAD9},
    {0xFE10, 0xFE1F}, {0xFE30, 0xFE4F}, {0xFF00, 0xFFEF},
};

}  // namespace

bool is_zh_tokenizer_char(char32_t cp) {
  for (const auto& r : kZhRanges)
    if (cp >= r.first && cp <= r.last) return true;
  return false;
}

void tokenize_zh(std::string_view line, std::string& out) {
  line = text::strip(line);
  thread_local std::string spaced;
  spaced.clear();
  spaced.reserve(line.size() * 2);
  for (std::size_t i = 0; i < line.size();) {
    std::size_t start = i;
    char32_t cp = text::decode_utf8(line, i);
    if (cp >= 0x2001 && is_zh_tokenizer_char(cp)) {
      spaced += ' ';
      spaced.append(line.substr(start, i - start));
      spaced += ' ';
    } else {
      spaced.append(line.substr(start, i - start));
    }
  }
  apply_mteval_regexes(spaced, out);
}

}  // namespace parla::metrics

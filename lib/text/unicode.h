#pragma once
// UTF-8 and the parts of Python's `str` semantics that text processing and scoring must reproduce exactly:
// `str.isspace`, `str.split()`, `str.strip()/rstrip()`, `str.lower()` (full Unicode mapping with final sigma) and
// the Unicode general category (`unicodedata.category`), all from Python 3.11's Unicode 14.0 tables
// (tools/gen_unicode_tables.py). Torch-free; safe to use from any layer.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace parla::text {

// Unicode general categories, in the order of tools/gen_unicode_tables.py's CATEGORIES.
enum class GeneralCategory : uint8_t {
  Cn, Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No, Pc, Pd, Ps, Pe, Pi, Pf, Po, Sm, Sc, Sk, So, Zs, Zl, Zp, Cc, Cf,
  Cs, Co
};

GeneralCategory general_category(char32_t cp);
// \p{N}, \p{P}, \p{S} of the `regex` module: the major class of the general category.
bool is_number(char32_t cp);       // Nd, Nl, No
bool is_punctuation(char32_t cp);  // Pc, Pd, Ps, Pe, Pi, Pf, Po
bool is_symbol(char32_t cp);       // Sm, Sc, Sk, So

// Python's str.isspace() for one code point.
bool is_space(char32_t cp);

// ---- UTF-8 ----
// Index of the first byte of `s` that does not start a well-formed UTF-8 sequence (overlong forms, surrogates
// and code points above U+10FFFF are ill-formed, as in Python's strict decoder), or npos when all of `s` is valid.
std::size_t find_invalid_utf8(std::string_view s);
inline bool is_valid_utf8(std::string_view s) { return find_invalid_utf8(s) == std::string_view::npos; }

// Decodes the code point starting at s[i] (which must be valid UTF-8) and advances i past it.
inline char32_t decode_utf8(std::string_view s, std::size_t& i) {
  auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) {
    ++i;
    return b;
  }
  if (b < 0xE0) {
    char32_t cp = ((b & 0x1F) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3F);
    i += 2;
    return cp;
  }
  if (b < 0xF0) {
    char32_t cp = ((b & 0x0F) << 12) | ((static_cast<unsigned char>(s[i + 1]) & 0x3F) << 6) |
                  (static_cast<unsigned char>(s[i + 2]) & 0x3F);
    i += 3;
    return cp;
  }
  char32_t cp = ((b & 0x07) << 18) | ((static_cast<unsigned char>(s[i + 1]) & 0x3F) << 12) |
                ((static_cast<unsigned char>(s[i + 2]) & 0x3F) << 6) | (static_cast<unsigned char>(s[i + 3]) & 0x3F);
  i += 4;
  return cp;
}
// Byte length of the UTF-8 sequence that starts with lead byte `b`.
inline std::size_t utf8_length(unsigned char b) { return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }
void append_utf8(std::string& out, char32_t cp);
std::u32string to_u32(std::string_view utf8);
std::string to_utf8(std::u32string_view u32);

// ---- Python str operations on valid UTF-8 ----
// str.rstrip() / str.strip(): removes Unicode whitespace (is_space) at the end / both ends.
std::string_view rstrip(std::string_view s);
std::string_view strip(std::string_view s);
// str.split() with no argument: the maximal runs of non-whitespace, appended to `out` as views into `s`.
void split_whitespace(std::string_view s, std::vector<std::string_view>& out);
// str.lower(): full lowercase mapping (U+0130 -> "i̇") with the Final_Sigma context for U+03A3.
std::string lower(std::string_view s);
void lower(std::string_view s, std::string& out);

}  // namespace parla::text

#include "text/unicode.h"

#include <algorithm>

#include "text/unicode_tables.h"

namespace parla::text {

namespace {

bool in_ranges(const tables::CodeRange* ranges, std::size_t n, char32_t cp) {
  const tables::CodeRange* end = ranges + n;
  const tables::CodeRange* it =
      std::upper_bound(ranges, end, cp, [](char32_t c, const tables::CodeRange& r) { return c < r.first; });
  return it != ranges && cp <= (it - 1)->last;
}

bool is_case_ignorable(char32_t cp) { return in_ranges(tables::kCaseIgnorable, tables::kCaseIgnorableCount, cp); }
bool is_cased_not_ignorable(char32_t cp) {
  return in_ranges(tables::kCasedNotIgnorable, tables::kCasedNotIgnorableCount, cp);
}

// CPython's handle_capital_sigma (Unicode 3.13 Final_Sigma): U+03A3 becomes final ς when a cased letter precedes
// it and none follows, skipping case-ignorable code points on both sides.
char32_t lower_sigma(const std::u32string& s, std::size_t i) {
  std::size_t j = i;
  char32_t c = 0;
  bool found = false;
  while (j > 0) {
    c = s[--j];
    if (!is_case_ignorable(c)) {
      found = true;
      break;
    }
  }
  bool final_sigma = found && is_cased_not_ignorable(c);
  if (final_sigma) {
    for (j = i + 1; j < s.size(); ++j) {
      c = s[j];
      if (!is_case_ignorable(c)) break;
    }
    final_sigma = j == s.size() || !is_cased_not_ignorable(c);
  }
  return final_sigma ? 0x3C2 : 0x3C3;
}

}  // namespace

GeneralCategory general_category(char32_t cp) {
  if (cp > 0x10FFFF) return GeneralCategory::Cn;
  const tables::CategoryRun* begin = tables::kCategoryRuns;
  const tables::CategoryRun* end = begin + tables::kCategoryRunCount;
  const tables::CategoryRun* it =
      std::upper_bound(begin, end, cp, [](char32_t c, const tables::CategoryRun& r) { return c < r.start; });
  return static_cast<GeneralCategory>((it - 1)->category);
}

bool is_number(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  auto c = general_category(cp);
  return c == GeneralCategory::Nd || c == GeneralCategory::Nl || c == GeneralCategory::No;
}

bool is_punctuation(char32_t cp) {
  auto c = static_cast<uint8_t>(general_category(cp));
  return c >= static_cast<uint8_t>(GeneralCategory::Pc) && c <= static_cast<uint8_t>(GeneralCategory::Po);
}

bool is_symbol(char32_t cp) {
  auto c = static_cast<uint8_t>(general_category(cp));
  return c >= static_cast<uint8_t>(GeneralCategory::Sm) && c <= static_cast<uint8_t>(GeneralCategory::So);
}

bool is_space(char32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  const char32_t* end = tables::kPythonSpaces + tables::kPythonSpaceCount;
  return std::binary_search(tables::kPythonSpaces, end, cp);
}

std::size_t find_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned char b = p[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    auto cont = [&](std::size_t k) { return i + k < n && (p[i + k] & 0xC0) == 0x80; };
    if (b >= 0xC2 && b <= 0xDF) {
      if (!cont(1)) return i;
      i += 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      if (!cont(1) || !cont(2)) return i;
      if (b == 0xE0 && p[i + 1] < 0xA0) return i;   // overlong
      if (b == 0xED && p[i + 1] >= 0xA0) return i;  // surrogate
      i += 3;
    } else if (b >= 0xF0 && b <= 0xF4) {
      if (!cont(1) || !cont(2) || !cont(3)) return i;
      if (b == 0xF0 && p[i + 1] < 0x90) return i;   // overlong
      if (b == 0xF4 && p[i + 1] >= 0x90) return i;  // above U+10FFFF
      i += 4;
    } else {
      return i;
    }
  }
  return std::string_view::npos;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::u32string to_u32(std::string_view utf8) {
  std::u32string out;
  out.reserve(utf8.size());
  for (std::size_t i = 0; i < utf8.size();) out += decode_utf8(utf8, i);
  return out;
}

std::string to_utf8(std::u32string_view u32) {
  std::string out;
  out.reserve(u32.size());
  for (char32_t c : u32) append_utf8(out, c);
  return out;
}

std::string_view rstrip(std::string_view s) {
  std::size_t end = s.size();
  while (end > 0) {
    // Step back over one code point: continuation bytes are 10xxxxxx.
    std::size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    std::size_t i = start;
    if (!is_space(decode_utf8(s, i))) break;
    end = start;
  }
  return s.substr(0, end);
}

std::string_view strip(std::string_view s) {
  s = rstrip(s);
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t next = i;
    if (!is_space(decode_utf8(s, next))) break;
    i = next;
  }
  return s.substr(i);
}

void split_whitespace(std::string_view s, std::vector<std::string_view>& out) {
  std::size_t i = 0, n = s.size();
  std::size_t token_start = std::string_view::npos;
  while (i < n) {
    auto b = static_cast<unsigned char>(s[i]);
    std::size_t next = i;
    bool space;
    if (b < 0x80) {
      space = (b >= 0x09 && b <= 0x0D) || (b >= 0x1C && b <= 0x20);
      next = i + 1;
    } else {
      space = is_space(decode_utf8(s, next));
    }
    if (space) {
      if (token_start != std::string_view::npos) {
        out.push_back(s.substr(token_start, i - token_start));
        token_start = std::string_view::npos;
      }
    } else if (token_start == std::string_view::npos) {
      token_start = i;
    }
    i = next;
  }
  if (token_start != std::string_view::npos) out.push_back(s.substr(token_start));
}

void lower(std::string_view s, std::string& out) {
  out.clear();
  bool ascii = std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  if (ascii) {
    out.resize(s.size());
    std::transform(s.begin(), s.end(), out.begin(),
                   [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; });
    return;
  }
  std::u32string u = to_u32(s);
  out.reserve(s.size() + 8);
  for (std::size_t i = 0; i < u.size(); ++i) {
    char32_t c = u[i];
    if (c == 0x3A3) {
      append_utf8(out, lower_sigma(u, i));
      continue;
    }
    const auto* sb = tables::kLowerSingle;
    const auto* se = sb + tables::kLowerSingleCount;
    const auto* it = std::lower_bound(sb, se, c, [](const tables::LowerPair& p, char32_t v) { return p.from < v; });
    if (it != se && it->from == c) {
      append_utf8(out, it->to);
      continue;
    }
    const auto* mb = tables::kLowerMulti;
    const auto* me = mb + tables::kLowerMultiCount;
    const auto* mt = std::lower_bound(mb, me, c, [](const tables::LowerMulti& p, char32_t v) { return p.from < v; });
    if (mt != me && mt->from == c) {
      for (int k = 0; k < mt->length; ++k) append_utf8(out, mt->to[k]);
      continue;
    }
    append_utf8(out, c);
  }
}

std::string lower(std::string_view s) {
  std::string out;
  lower(s, out);
  return out;
}

}  // namespace parla::text

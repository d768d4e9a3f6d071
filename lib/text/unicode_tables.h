#pragma once
// Unicode data tables generated from Python 3.11's own database (tools/gen_unicode_tables.py), so that parla's
// lowercasing, whitespace and general categories are exactly Python's (and so sacreBLEU's). Internal to
// text/unicode.cpp; use the functions in text/unicode.h.
#include <cstddef>
#include <cstdint>

namespace parla::text::tables {

struct CategoryRun {
  char32_t start;
  uint8_t category;  // index into GeneralCategory (text/unicode.h)
};
struct LowerPair {
  char32_t from, to;
};
struct LowerMulti {
  char32_t from;
  uint8_t length;
  char32_t to[3];
};
struct CodeRange {
  char32_t first, last;  // inclusive
};

extern const CategoryRun kCategoryRuns[];
extern const std::size_t kCategoryRunCount;
extern const LowerPair kLowerSingle[];
extern const std::size_t kLowerSingleCount;
extern const LowerMulti kLowerMulti[];
extern const std::size_t kLowerMultiCount;
extern const CodeRange kCaseIgnorable[];
extern const std::size_t kCaseIgnorableCount;
extern const CodeRange kCasedNotIgnorable[];
extern const std::size_t kCasedNotIgnorableCount;
extern const char32_t kPythonSpaces[];
extern const std::size_t kPythonSpaceCount;

}  // namespace parla::text::tables

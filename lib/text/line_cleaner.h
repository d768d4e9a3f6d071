#pragma once
// What parla-preprocess does to one line before any pair filter: UTF-8 validation, optional Unicode
// normalisation, removal of control characters, and whitespace normalisation (strip, collapse runs).
#include <string>
#include <string_view>

#include "core/config/data_config.h"
#include "text/unicode.h"  // is_valid_utf8

namespace parla::text {

// Which cleaning steps changed a line (each is counted in stats.json).
struct LineEdits {
  bool unicode = false;     // Unicode normalisation changed it
  bool control = false;     // control characters were removed or turned into spaces
  bool whitespace = false;  // whitespace was stripped or collapsed
};

// Unicode White_Space characters (the set Python's str.isspace() uses, Moses/sacreBLEU's notion of a space).
bool is_unicode_space(char32_t c);
// Control characters (general category Cc: C0, DEL, C1) plus U+FEFF, the byte order mark, which Windows
// tools leave at the start of files.
bool is_control(char32_t c);

class LineCleaner {
 public:
  explicit LineCleaner(const CleanConfig& config);
  // Cleans `in` into `out`. Returns false (and leaves `out` unspecified) when `in` is not valid UTF-8.
  // Control characters that are also whitespace (tab, CR, U+0085...) become a space; the others are deleted.
  bool clean(std::string_view in, std::string& out, LineEdits* edits = nullptr) const;

 private:
  CleanConfig config_;
};

// Whitespace-separated tokens of a cleaned line (the unit of data.clean.max_tokens and max_length_ratio).
size_t count_tokens(std::string_view cleaned);

}  // namespace parla::text

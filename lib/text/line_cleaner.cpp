#include "text/line_cleaner.h"

#include "text/normalization_form.h"

namespace parla::text {

namespace {

// Decodes the code point at s[i] of valid UTF-8 and advances i.
char32_t decode_at(std::string_view s, size_t& i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    ++i;
    return c;
  }
  int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
  char32_t cp = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  // Bounds-checked so that count_tokens cannot read past the end of malformed input.
  for (int k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += len;
  return cp;
}

// Removes control characters; the ones that are whitespace become a space (tab-separated words stay apart).
bool remove_control(std::string_view in, std::string& out) {
  out.clear();
  out.reserve(in.size());
  bool changed = false;
  for (size_t i = 0; i < in.size();) {
    size_t start = i;
    char32_t cp = decode_at(in, i);
    if (is_control(cp)) {
      changed = true;
      if (is_unicode_space(cp)) out.push_back(' ');
    } else {
      out.append(in.substr(start, i - start));
    }
  }
  return changed;
}

// Strips leading and trailing whitespace and turns every inner run of Unicode whitespace into one space.
bool collapse_whitespace(std::string_view in, std::string& out) {
  out.clear();
  out.reserve(in.size());
  bool pending_space = false;
  for (size_t i = 0; i < in.size();) {
    size_t start = i;
    char32_t cp = decode_at(in, i);
    if (is_unicode_space(cp)) {
      pending_space = true;
      continue;
    }
    if (pending_space && !out.empty()) out.push_back(' ');
    pending_space = false;
    out.append(in.substr(start, i - start));
  }
  return out != in;
}

}  // namespace

bool is_unicode_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_control(char32_t c) { return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0xFEFF; }

LineCleaner::LineCleaner(const CleanConfig& config) : config_(config) {
  if (config_.unicode_normalization != NormalizationForm::kNone)
    require_normalization_support();
}

bool LineCleaner::clean(std::string_view in, std::string& out, LineEdits* edits) const {
  if (!is_valid_utf8(in)) return false;
  LineEdits e;
  std::string a(in), b;
  // Normalisation first: NFKC can produce spaces (U+00A0 -> U+0020) that the later steps then collapse.
  const NormalizationForm form = config_.unicode_normalization;
  if (form != NormalizationForm::kNone) {
    b = normalize(a, form);
    e.unicode = b != a;
    a.swap(b);
  }
  if (config_.remove_control && remove_control(a, b)) {
    e.control = true;
    a.swap(b);
  }
  if (config_.normalize_whitespace && collapse_whitespace(a, b)) {
    e.whitespace = true;
    a.swap(b);
  }
  out.swap(a);
  if (edits) *edits = e;
  return true;
}

size_t count_tokens(std::string_view s) {
  size_t n = 0;
  bool in_token = false;
  for (size_t i = 0; i < s.size();) {
    char32_t cp = decode_at(s, i);
    bool space = is_unicode_space(cp);
    if (!space && !in_token) ++n;
    in_token = !space;
  }
  return n;
}

}  // namespace parla::text

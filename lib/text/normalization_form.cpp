#include "text/normalization_form.h"

#include <dlfcn.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "text/unicode.h"

namespace parla::text {

namespace {

// The slice of ICU's C API (unicode/unorm2.h) used here; UChar is UTF-16, UErrorCode an int (0 = ok,
// > 0 = failure, 15 = U_BUFFER_OVERFLOW_ERROR).
using UErrorCode = int;
using GetInstanceFn = const void* (*)(UErrorCode*);
using NormalizeFn = int32_t (*)(const void*, const char16_t*, int32_t, char16_t*, int32_t, UErrorCode*);

struct Icu {
  const void* nfc = nullptr;
  const void* nfkc = nullptr;
  NormalizeFn normalize = nullptr;
  std::string error;
};

const Icu& icu() {
  static const Icu loaded = [] {
    Icu icu;
    void* lib = nullptr;
    std::string suffix;
    // ICU suffixes every symbol with its major version (unorm2_normalize_72).
    for (int v = 80; v >= 50 && !lib; --v) {
      std::string name = "libicuuc.so." + std::to_string(v);
      if ((lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL))) suffix = "_" + std::to_string(v);
    }
    if (!lib) {
      icu.error = "cannot load ICU (libicuuc.so.NN) for Unicode normalisation; install libicu72 or set "
                  "data.clean.unicode_normalization to \"none\"";
      return icu;
    }
    auto nfc = reinterpret_cast<GetInstanceFn>(dlsym(lib, ("unorm2_getNFCInstance" + suffix).c_str()));
    auto nfkc = reinterpret_cast<GetInstanceFn>(dlsym(lib, ("unorm2_getNFKCInstance" + suffix).c_str()));
    icu.normalize = reinterpret_cast<NormalizeFn>(dlsym(lib, ("unorm2_normalize" + suffix).c_str()));
    UErrorCode e1 = 0, e2 = 0;
    if (nfc) icu.nfc = nfc(&e1);
    if (nfkc) icu.nfkc = nfkc(&e2);
    if (!icu.normalize || !icu.nfc || !icu.nfkc || e1 > 0 || e2 > 0)
      icu.error = "the ICU library found lacks the unorm2 normalisation API";
    return icu;
  }();
  return loaded;
}

std::u16string to_utf16(std::string_view s) {
  std::u16string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    char32_t cp;
    int len;
    if (c < 0x80) { cp = c; len = 1; }
    else if ((c >> 5) == 0x6) { cp = c & 0x1F; len = 2; }
    else if ((c >> 4) == 0xE) { cp = c & 0x0F; len = 3; }
    else { cp = c & 0x07; len = 4; }
    for (int k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    i += len;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      out.push_back(static_cast<char16_t>(0xD800 + (cp >> 10)));
      out.push_back(static_cast<char16_t>(0xDC00 + (cp & 0x3FF)));
    } else {
      out.push_back(static_cast<char16_t>(cp));
    }
  }
  return out;
}

std::string to_utf8(const char16_t* s, size_t n) {
  std::string out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    char32_t cp = s[i];
    if (cp >= 0xD800 && cp < 0xDC00 && i + 1 < n) {
      cp = 0x10000 + ((cp - 0xD800) << 10) + (s[i + 1] - 0xDC00);
      ++i;
    }
    append_utf8(out, cp);
  }
  return out;
}

}  // namespace

void require_normalization_support() {
  if (!icu().error.empty()) throw ConfigError(icu().error);
}

std::string normalize(std::string_view utf8, NormalizationForm form) {
  if (form == NormalizationForm::kNone) return std::string(utf8);
  // ASCII is invariant under every normalisation form (UAX #15), and most corpus lines are ASCII.
  bool ascii = true;
  for (char c : utf8) ascii &= static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(utf8);
  require_normalization_support();
  const Icu& lib = icu();
  std::u16string src = to_utf16(utf8);
  // NFKC can expand a character up to 18 times (U+FDFA); grow on overflow rather than allocate for the worst.
  std::vector<char16_t> dst(src.size() * 2 + 16);
  for (;;) {
    UErrorCode err = 0;
    int32_t n = lib.normalize(form == NormalizationForm::kNfc ? lib.nfc : lib.nfkc, src.data(),
                              static_cast<int32_t>(src.size()), dst.data(), static_cast<int32_t>(dst.size()), &err);
    if (err == 15 || (err <= 0 && n > static_cast<int32_t>(dst.size()))) {
      dst.resize(static_cast<size_t>(n) + 16);
      continue;
    }
    if (err > 0) throw DataError("Unicode normalisation failed (ICU error " + std::to_string(err) + ")");
    return to_utf8(dst.data(), static_cast<size_t>(n));
  }
}

}  // namespace parla::text

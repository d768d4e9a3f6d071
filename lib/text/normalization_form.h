#pragma once
// Unicode normalisation forms NFC and NFKC (Unicode Standard Annex #15). parla does not carry the Unicode
// tables itself: it calls ICU's C API in the system's libicuuc (a LibTorch dependency on Debian, so always
// present where parla runs), loaded at run time so the build needs no ICU headers.
#include <string>
#include <string_view>

#include "core/config/data_config.h"

namespace parla::text {

// data.clean.unicode_normalization, parsed with the config.
using NormalizationForm = UnicodeNormalization;

// Normalises valid UTF-8 text. Throws ConfigError when ICU cannot be loaded (naming the library), so the
// failure shows before any data is read if the caller checks with normalization_available() first.
std::string normalize(std::string_view utf8, NormalizationForm form);
// Loads ICU if needed; throws ConfigError with the reason when it cannot.
void require_normalization_support();

}  // namespace parla::text

#pragma once
// Text files that are not all UTF-8. Europarl's older release files are in latin-1 (Windows' superset of it,
// cp1252, where bytes 0x80-0x9F are quotes, dashes and the euro sign rather than control characters), some
// files start with a byte-order mark and some end their lines with CRLF. A reader of such files decodes each line
// on its own: a line that is valid UTF-8 is kept as it is, any other is read as cp1252 and converted, so a file that
// mixes both (a latin-1 file whose lines are mostly ASCII) comes out whole, and what was converted is reported.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace parla::text {

struct TextDecoding {
  bool byte_order_mark = false;    // a leading UTF-8 BOM, dropped
  uint64_t lines = 0;
  uint64_t crlf_lines = 0;         // lines that ended in CR LF (the CR is dropped)
  uint64_t converted_lines = 0;    // lines read as cp1252 because they were not UTF-8
  uint64_t first_converted_line = 0;  // 1-based; 0 when none
};

// cp1252 (WHATWG's "latin-1") to UTF-8; the five bytes cp1252 leaves undefined map to U+0081, U+008D, ... as in
// latin-1.
std::string cp1252_to_utf8(std::string_view bytes);

// Splits a file's bytes into lines (LF or CR LF; a last line without LF counts), decoding each as above.
std::vector<std::string> decode_text_lines(std::string_view bytes, TextDecoding& report);

}  // namespace parla::text

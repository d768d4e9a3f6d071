#include "text/legacy_encoding.h"

#include "text/unicode.h"

namespace parla::text {

namespace {

// Code points of bytes 0x80-0x9F in cp1252; the undefined ones keep their latin-1 (C1 control) value.
constexpr char16_t kCp1252High[32] = {
    0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x008D,
    0x017D, 0x008F, 0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A,
    0x0153, 0x009D, 0x017E, 0x0178};

}  // namespace

std::string cp1252_to_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + bytes.size() / 8);
  for (char ch : bytes) {
    auto b = static_cast<unsigned char>(ch);
    if (b < 0x80)
      out.push_back(ch);
    else
      append_utf8(out, b < 0xA0 ? static_cast<char32_t>(kCp1252High[b - 0x80]) : static_cast<char32_t>(b));
  }
  return out;
}

std::vector<std::string> decode_text_lines(std::string_view bytes, TextDecoding& report) {
  std::vector<std::string> lines;
  if (bytes.substr(0, 3) == "\xEF\xBB\xBF") {
    report.byte_order_mark = true;
    bytes.remove_prefix(3);
  }
  while (!bytes.empty()) {
    size_t end = bytes.find('\n');
    std::string_view line = bytes.substr(0, end);
    bytes.remove_prefix(end == std::string_view::npos ? bytes.size() : end + 1);
    ++report.lines;
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
      ++report.crlf_lines;
    }
    if (is_valid_utf8(line)) {
      lines.emplace_back(line);
    } else {
      if (report.converted_lines++ == 0) report.first_converted_line = report.lines;
      lines.push_back(cp1252_to_utf8(line));
    }
  }
  return lines;
}

}  // namespace parla::text

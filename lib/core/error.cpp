#include "core/error.h"

#include <spdlog/spdlog.h>

namespace parla {

std::string first_line(const std::string& text) {
  size_t end = std::min(text.find('\n'), text.find("Exception raised from"));
  std::string line = text.substr(0, std::min(end, text.size()));
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.pop_back();
  if (line.empty()) line = "unknown error";
  constexpr size_t kMax = 300;
  if (line.size() > kMax) line = line.substr(0, kMax - 3) + "...";
  return line;
}

std::string brief_reason(const std::exception& e) {
  std::string whole = e.what();
  std::string line = first_line(whole);
  if (line != whole) spdlog::debug("the whole error text: {}", whole);
  return line;
}

}  // namespace parla

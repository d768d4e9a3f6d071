#pragma once
// Small file helpers shared by the tests.
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace parla::testing {

// The whole file, bytes as they are ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A text's lines, as std::getline splits them (a final '\n' adds no empty line).
inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string::size_type start = 0;
  while (start < text.size()) {
    const auto nl = text.find('\n', start);
    lines.push_back(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return lines;
}

// The tools in tools/ are python3 scripts (tools/setup.sh installs python3).
inline bool have_python() { return std::system("python3 -c 'import sys' >/dev/null 2>&1") == 0; }

}  // namespace parla::testing

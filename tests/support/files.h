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

// The tools in tools/ are python3 scripts (tools/setup.sh installs python3).
inline bool have_python() { return std::system("python3 -c 'import sys' >/dev/null 2>&1") == 0; }

}  // namespace parla::testing

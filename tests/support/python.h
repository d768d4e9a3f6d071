#pragma once
// Tests that compare with a Python package (the independent implementation of a format) find an interpreter that
// has it: the project's .venv-torch2 (tools/setup-libtorch2.sh installs the peers there), then python3. Without
// one the test prints the marker below and returns, and CTest reports it as skipped, never as passed.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace parla::testing {

// An interpreter that can `import module`, or "" after printing the skip marker.
inline std::string python_with(const std::string& module) {
  for (const std::string& python : {std::string(PARLA_SOURCE_DIR) + "/.venv-torch2/bin/python", std::string("python3")}) {
    if (python.find('/') != std::string::npos && !std::filesystem::exists(python)) continue;
    const std::string probe = python + " -c 'import " + module + "' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return python;
  }
  std::printf("PARLA-SKIP: needs Python's %s\n", module.c_str());
  std::fflush(stdout);
  return "";
}

}  // namespace parla::testing

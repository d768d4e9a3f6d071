#pragma once
// How much of one memory mapping, or of the whole process, is resident, from /proc/self (Linux).
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace parla::testing {

// Resident kB of the mapping that contains `p`, from /proc/self/smaps (-1 if not found).
inline long resident_kb(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (line.find(':') == std::string::npos || line.find('-') < line.find(':')) {
      if (head >> std::hex >> begin >> dash >> end && dash == '-') inside = begin <= at && at < end;
      continue;
    }
    if (inside && line.rfind("Rss:", 0) == 0) return std::stol(line.substr(4));
  }
  return -1;
}

// Resident kB of the whole process (VmRSS).
inline long resident_process_kb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

}  // namespace parla::testing

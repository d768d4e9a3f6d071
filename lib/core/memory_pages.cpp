#include "core/memory_pages.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include <sys/mman.h>
#include <unistd.h>

namespace parla {

void release_pages(const void* begin, size_t bytes) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(begin);
  const uintptr_t first = (start + page - 1) / page * page, last = (start + bytes) / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

bool page_out(const void* begin, size_t bytes) {
#ifdef MADV_PAGEOUT
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(begin) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(begin) + bytes + page - 1) / page * page;
  return end > start && ::madvise(reinterpret_cast<void*>(start), end - start, MADV_PAGEOUT) == 0;
#else
  (void)begin;
  (void)bytes;
  return false;
#endif
}

namespace {

bool is_shared_object(const std::string& path) {
  const auto name = path.substr(path.rfind('/') + 1);
  const auto so = name.find(".so");
  return so != std::string::npos && (so + 3 == name.size() || name[so + 3] == '.');
}

}  // namespace

std::vector<MappedRange> page_out_libraries() {
  std::vector<MappedRange> advised;
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  const std::string self = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string();
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    // begin-end perms offset dev inode path
    std::istringstream in(line);
    std::string range, perms, offset, dev, inode, path;
    if (!(in >> range >> perms >> offset >> dev >> inode)) continue;
    std::getline(in >> std::ws, path);
    if (perms.size() < 4 || perms[0] != 'r' || perms[1] != '-' || path.empty() || path[0] != '/') continue;
    if (!is_shared_object(path) && path != self) continue;
    MappedRange r;
    if (std::sscanf(range.c_str(), "%lx-%lx", &r.begin, &r.end) != 2 || r.end <= r.begin) continue;
    r.path = path;
    if (page_out(reinterpret_cast<const void*>(r.begin), r.end - r.begin)) advised.push_back(std::move(r));
  }
  return advised;
}

}  // namespace parla

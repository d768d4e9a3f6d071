#include "core/memory_pages.h"

#include <cstdint>

#include <sys/mman.h>
#include <unistd.h>

namespace parla {

void release_pages(const void* begin, size_t bytes) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(begin);
  const uintptr_t first = (start + page - 1) / page * page, last = (start + bytes) / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace parla

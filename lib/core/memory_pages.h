#pragma once
// Giving memory back page by page.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace parla {

// While a large buffer is still in use: the whole pages inside [begin, begin + bytes) leave this process (madvise
// MADV_DONTNEED). A file mapping reads them again from the file when next touched; anonymous memory reads zeros. So
// only for contents nobody needs again (a weight already copied into another layout, a file already copied out).
// Partial pages at either end stay; the call is advice, and a failure only costs memory.
void release_pages(const void* begin, size_t bytes);

// The resident pages of [begin, begin + bytes) are reclaimed (madvise MADV_PAGEOUT, Linux 5.4 on): clean file pages
// leave memory and are read again from the file when next touched; nothing is lost, whatever the mapping (the
// kernel keeps what it cannot write back, and pages another process maps too). False where the advice is refused.
bool page_out(const void* begin, size_t bytes);

struct MappedRange {
  uintptr_t begin = 0, end = 0;
  std::string path;
};

// page_out for every read-only mapping of a shared library or of the executable (their code, constants and
// relocation tables; /proc/self/maps), which are the same bytes as their files. A LibTorch process touches ~40 MB of
// them while starting (its constructors register ~2,000 operators) and loading a model, and decoding runs little
// of it: what it does run comes back as it runs (core/lean_load.h calls this). Returns the ranges advised.
std::vector<MappedRange> page_out_libraries();

}  // namespace parla

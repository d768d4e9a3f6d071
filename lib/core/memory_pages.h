#pragma once
// Giving memory back page by page while a large buffer is still in use: the whole pages inside [begin, begin +
// bytes) leave this process (madvise MADV_DONTNEED). A file mapping reads them again from the file when next
// touched; anonymous memory reads zeros. So only for contents nobody needs again (a weight already copied into
// another layout, a file already copied out). Partial pages at either end stay; the call is advice, and a failure
// only costs memory.
#include <cstddef>

namespace parla {

void release_pages(const void* begin, size_t bytes);

}  // namespace parla

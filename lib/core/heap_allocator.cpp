#include "core/heap_allocator.h"

#include <dlfcn.h>
#include <malloc.h>

#include <cstddef>

namespace parla {

namespace {

// tcmalloc's C interface, looked up rather than linked, so the library works under either allocator.
struct Tcmalloc {
  void (*release_free_memory)() = nullptr;
  int (*numeric_property)(const char*, size_t*) = nullptr;
};

const Tcmalloc& tcmalloc() {
  static const Tcmalloc found = [] {
    Tcmalloc t;
    // Loaded is not enough: its malloc must be the one everybody calls (tcmalloc's malloc is an alias of tc_malloc).
    void* tc = dlsym(RTLD_DEFAULT, "tc_malloc");
    if (!tc || dlsym(RTLD_DEFAULT, "malloc") != tc) return t;
    t.release_free_memory = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory"));
    t.numeric_property =
        reinterpret_cast<int (*)(const char*, size_t*)>(dlsym(RTLD_DEFAULT, "MallocExtension_GetNumericProperty"));
    if (!t.release_free_memory || !t.numeric_property) return Tcmalloc{};
    return t;
  }();
  return found;
}

}  // namespace

std::string heap_allocator_name() { return tcmalloc().release_free_memory ? "tcmalloc" : "glibc malloc"; }

bool return_free_memory() {
  if (const auto& tc = tcmalloc(); tc.release_free_memory) {
    // Free pages of tcmalloc's page heap go back as "unmapped" ones.
    size_t before = 0, after = 0;
    tc.numeric_property("tcmalloc.pageheap_unmapped_bytes", &before);
    tc.release_free_memory();
    tc.numeric_property("tcmalloc.pageheap_unmapped_bytes", &after);
    return after > before;
  }
#ifdef __GLIBC__
  return malloc_trim(0) == 1;
#else
  return false;
#endif
}

}  // namespace parla

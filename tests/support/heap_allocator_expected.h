#pragma once
// The heap allocator a test binary was linked with (tests/CMakeLists.txt defines PARLA_HEAP_TCMALLOC where the build
// found tcmalloc: cmake/HeapAllocator.cmake), as parla::heap_allocator_name() names it.
namespace parla::testing {

inline const char* expected_heap_allocator() {
#ifdef PARLA_HEAP_TCMALLOC
  return "tcmalloc";
#else
  return "glibc malloc";
#endif
}

}  // namespace parla::testing

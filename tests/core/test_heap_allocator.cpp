#include <catch2/catch.hpp>

#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "core/heap_allocator.h"
#include "support/heap_allocator_expected.h"
#include "support/resident_memory.h"

TEST_CASE("heap allocator: the test binary runs on the allocator the build chose") {
  CHECK(parla::heap_allocator_name() == parla::testing::expected_heap_allocator());
}

TEST_CASE("heap allocator: return_free_memory gives freed heap pages back to the system and says so") {
#ifdef __GLIBC__
  // 64 MB written and freed. glibc is told what parla's executables tell it (runtime::tune_process): no mmap of
  // its own for a large block, and no trim of the heap top at free, so only the call below can give it back.
  // tcmalloc may give back part of it at free already (its release rate); the call gives back the rest.
  if (parla::heap_allocator_name() == "glibc malloc") {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
  const size_t bytes = size_t{64} << 20;
  auto* block = static_cast<char*>(std::malloc(bytes));
  REQUIRE(block);
  std::memset(block, 1, bytes);
  auto* above = static_cast<char*>(std::malloc(64));
  REQUIRE(above);
  const long before = parla::testing::resident_process_kb();
  std::free(block);
  const long freed = parla::testing::resident_process_kb();
  const bool returned = parla::return_free_memory();
  const long after = parla::testing::resident_process_kb();
  INFO("VmRSS " << before << " -> " << freed << " after free -> " << after << " kB");
  CHECK(before - after > 60 * 1024);
  // "Says so": it reports true whenever it gave back a good part of the block.
  if (freed - after > 16 * 1024) CHECK(returned);
  if (parla::heap_allocator_name() == "glibc malloc") CHECK(freed - after > 60 * 1024);
  std::free(above);
#endif
}

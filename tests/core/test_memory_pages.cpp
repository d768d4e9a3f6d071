// Pages handed back (core/memory_pages.h): page_out on a file mapping of the test's own, and the library mappings
// page_out_libraries advises.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "core/memory_pages.h"
#include "support/resident_memory.h"
#include "support/temp_dir.h"

namespace {

bool inside(const std::vector<parla::MappedRange>& ranges, const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  for (const auto& r : ranges)
    if (at >= r.begin && at < r.end) return true;
  return false;
}

}  // namespace

TEST_CASE("page_out: a file mapping's touched pages leave memory, and read back the same") {
  parla::testing::TempDir dir("page-out");
  const auto path = dir.file("pages.bin");
  const size_t bytes = size_t{8} << 20;
  {
    // Written back to the disk before it is mapped: only clean pages can leave memory at once.
    std::string block(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i) block[i] = static_cast<char>(i * 7 + 3);
    const int out = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(out >= 0);
    REQUIRE(::write(out, block.data(), bytes) == static_cast<ssize_t>(bytes));
    REQUIRE(::fsync(out) == 0);
    ::close(out);
  }
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  void* p = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  REQUIRE(p != MAP_FAILED);
  const auto* c = static_cast<const unsigned char*>(p);
  unsigned sum = 0;
  for (size_t i = 0; i < bytes; i += 4096) sum += c[i];
  const long touched = parla::testing::resident_kb(p);
  INFO("resident " << touched << " kB of " << bytes / 1024 << " kB touched");
  REQUIRE(touched >= static_cast<long>(bytes / 1024) * 3 / 4);
#ifdef MADV_PAGEOUT
  REQUIRE(parla::page_out(p, bytes));
  const long after = parla::testing::resident_kb(p);
  INFO("after page_out: " << after << " kB");
  CHECK(after < touched / 4);
#endif
  unsigned again = 0;
  for (size_t i = 0; i < bytes; i += 4096) again += c[i];
  CHECK(again == sum);
  for (size_t i = 0; i < bytes; i += 65537) CHECK(c[i] == static_cast<unsigned char>(i * 7 + 3));
  ::munmap(p, bytes);
}

TEST_CASE("page_out_libraries advises the libraries' read-only mappings, never a writable one, and the process "
          "runs on") {
#ifdef MADV_PAGEOUT
  const auto ranges = parla::page_out_libraries();
  REQUIRE(!ranges.empty());
  // libstdc++'s code is among them; its writable data (std::cout lives there) is not.
  Dl_info info{};
  REQUIRE(dladdr(reinterpret_cast<void*>(&std::terminate), &info) != 0);
  CHECK(std::string(info.dli_fname).find("libstdc++") != std::string::npos);
  CHECK(inside(ranges, reinterpret_cast<void*>(&std::terminate)));
  CHECK(!inside(ranges, &std::cout));
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  REQUIRE(n > 0);
  for (const auto& r : ranges) {
    INFO(r.path);
    CHECK((r.path.find(".so") != std::string::npos || r.path == std::string(exe, static_cast<size_t>(n))));
  }
  // Code that was paged out runs again (read back from its file as it is touched).
  std::string s = "paged out and back";
  CHECK(std::strlen(s.c_str()) == 18);
#endif
}

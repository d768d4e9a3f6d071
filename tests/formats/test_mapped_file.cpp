// MappedFile: the mapping reads the file's bytes, and release() takes a read range's pages out of the process
// (its resident size, read from /proc/self/smaps, falls) while the bytes read the same afterwards; ranges that
// are not whole pages of the mapping are left alone.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include <unistd.h>

#include "formats/mapped_file.h"
#include "support/resident_memory.h"
#include "support/temp_dir.h"

using parla::formats::MappedFile;

namespace {

uint64_t checksum(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

}  // namespace

TEST_CASE("released pages leave the process and read the same bytes again") {
  parla::testing::TempDir dir("mapped-file");
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE)), pages = 256;
  std::string content(pages * page + 123, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>((i * 2654435761u) >> 13);
  const auto file = MappedFile::open(dir.write("weights.bin", content));
  REQUIRE(file->size() == content.size());
  const uint64_t want = checksum(reinterpret_cast<const uint8_t*>(content.data()), content.size());
  CHECK(checksum(file->data(), file->size()) == want);  // every page touched
  const long touched = parla::testing::resident_kb(file->data());
  REQUIRE(touched >= static_cast<long>(pages * page / 1024));

  SECTION("a range of whole pages") {
    file->release(file->data() + page, 200 * page);
    CHECK(parla::testing::resident_kb(file->data()) <= touched - static_cast<long>(200 * page / 1024));
  }
  SECTION("a range with ragged ends releases the whole pages inside it, and the edges read on") {
    file->release(file->data() + 10, file->size() - 20);
    CHECK(parla::testing::resident_kb(file->data()) <= static_cast<long>(2 * page / 1024));
  }
  SECTION("ranges less than a page, or not inside the mapping, are left alone") {
    file->release(file->data() + 1, page - 2);
    file->release(file->data() + page, file->size());  // runs past the end
    file->release(file->data() - page, 2 * page);      // starts before it
    file->release(content.data(), page * 4);           // another buffer altogether
    CHECK(parla::testing::resident_kb(file->data()) == touched);
  }
  CHECK(checksum(file->data(), file->size()) == want);
}

TEST_CASE("a file truncated while it is mapped reads zeros past its new end and is refused, not a SIGBUS") {
  parla::testing::TempDir dir("mapped-truncated");
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE)), pages = 16;
  const std::string content(pages * page, 'x');
  const auto path = dir.write("weights.bin", content);
  const auto file = MappedFile::open(path);
  CHECK_FALSE(file->changed());
  CHECK(checksum(file->data(), file->size()) == checksum(reinterpret_cast<const uint8_t*>(content.data()),
                                                         content.size()));
  CHECK_NOTHROW(file->check_unchanged());
  REQUIRE(::truncate(path.c_str(), static_cast<off_t>(2 * page)) == 0);  // as `cp other.pt` over it would
  size_t x = 0, zero = 0;
  for (size_t i = 0; i < file->size(); ++i) {
    if (file->data()[i] == 'x') ++x;
    else if (file->data()[i] == 0) ++zero;
  }
  CHECK(x == 2 * page);  // the part still in the file reads the same
  CHECK(zero == (pages - 2) * page);
  CHECK(file->changed());
  CHECK_THROWS_WITH(file->check_unchanged(), Catch::Contains(path + ": changed while it was read"));
  CHECK_THROWS_WITH(file->release(file->data(), page), Catch::Contains("changed while it was read"));
  // a mapping of another file is not affected
  const auto other = MappedFile::open(dir.write("other.bin", content));
  CHECK(checksum(other->data(), other->size()) == checksum(reinterpret_cast<const uint8_t*>(content.data()),
                                                           content.size()));
  CHECK_FALSE(other->changed());
}

// NumPy's .npy and .npz (formats/npy.h, formats/npz.h): arrays written byte by byte as numpy.lib.format
// describes them, and headers that lie.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include <zip.h>

#include "core/error.h"
#include "formats/npy.h"
#include "formats/npz.h"

using namespace parla::formats;

namespace {

// Version 1: magic, 1.0, a 2-byte little-endian header length, the header padded with spaces to a multiple of 64
// ending in '\n', then the data.
std::string npy(const std::string& dict, const std::string& data) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

NpyArray parse_npy_bytes(const std::string& b) { return parse_npy(reinterpret_cast<const uint8_t*>(b.data()), b.size()); }

std::string floats(int n) {
  std::string s(static_cast<size_t>(n) * 4, '\0');
  for (int i = 0; i < n; ++i) {
    float f = static_cast<float>(i) + 0.5f;
    std::memcpy(&s[static_cast<size_t>(i) * 4], &f, 4);
  }
  return s;
}

}  // namespace

TEST_CASE("a .npy array written by hand is read: type, shape and where its data starts") {
  const auto b = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", floats(6));
  const auto a = parse_npy_bytes(b);
  CHECK(a.dtype == DType::F32);
  CHECK(a.shape == std::vector<int64_t>{2, 3});
  CHECK(a.data_offset % 64 == 0);
  CHECK(a.data_bytes == 24);
  float last;
  std::memcpy(&last, b.data() + a.data_offset + 20, 4);
  CHECK(last == 5.5f);
  const auto scalar = parse_npy_bytes(npy("{'descr': '|i1', 'fortran_order': False, 'shape': (), }", "x"));
  CHECK(scalar.shape.empty());
  CHECK(scalar.dtype == DType::I8);
}

TEST_CASE("a .npy header that lies, a big-endian or Fortran-ordered array, and an unknown type are refused") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not numpy at all", "magic"},
      {npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", floats(2)), "little-endian"},
      {npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", floats(4)), "Fortran"},
      {npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", floats(2)), "does not read"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", floats(2)), "needs 12"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", ""), "too large"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 8), }", ""), "overflows"},
      {npy("{'descr': '<f4', 'shape': (2,), }", floats(2)), "missing"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'evil': __import__('os'), }", floats(2)),
       "unknown key"},
      {npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", floats(2)), "True or False"},
  };
  for (const auto& [bytes, says] : cases) {
    INFO(says);
    try {
      parse_npy_bytes(bytes);
      FAIL("accepted");
    } catch (const parla::DataError& e) {
      CHECK_THAT(e.what(), Catch::Contains(says));
    }
  }
}

TEST_CASE("a .npz of stored and deflated arrays is read by name, and a zip bomb entry is refused") {
  auto make = [](bool bomb) {
    zip_error_t err;
    zip_error_init(&err);
    zip_source_t* out = zip_source_buffer_create(nullptr, 0, 0, &err);
    zip_source_keep(out);
    zip_t* z = zip_open_from_source(out, ZIP_TRUNCATE, &err);
    const std::string a = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", floats(3));
    const std::string b = bomb ? npy("{'descr': '|u1', 'fortran_order': False, 'shape': (50000000,), }",
                                     std::string(50'000'000, '\0'))
                               : npy("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\7'));
    zip_source_t* sa = zip_source_buffer(z, a.data(), a.size(), 0);
    zip_source_t* sb = zip_source_buffer(z, b.data(), b.size(), 0);
    zip_set_file_compression(z, zip_file_add(z, "w.npy", sa, 0), ZIP_CM_STORE, 0);
    zip_set_file_compression(z, zip_file_add(z, "special:model.yml.npy", sb, 0), ZIP_CM_DEFLATE, 9);
    zip_close(z);
    zip_source_open(out);
    zip_source_seek(out, 0, SEEK_END);
    const auto size = zip_source_tell(out);
    zip_source_seek(out, 0, SEEK_SET);
    std::string bytes(static_cast<size_t>(size), '\0');
    zip_source_read(out, bytes.data(), static_cast<zip_uint64_t>(size));
    zip_source_close(out);
    zip_source_free(out);
    return bytes;
  };
  const auto ok = make(false);
  const auto arrays = read_npz(reinterpret_cast<const uint8_t*>(ok.data()), ok.size());
  REQUIRE(arrays.size() == 2);
  CHECK(arrays.at("w").array.shape == std::vector<int64_t>{3});
  CHECK(arrays.at("special:model.yml").array.dtype == DType::I64);
  const auto bomb = make(true);  // 50 MB of zeros deflate to about 50 KB: more than 64 x
  CHECK(bomb.size() < 200'000);
  CHECK_THROWS_WITH(read_npz(reinterpret_cast<const uint8_t*>(bomb.data()), bomb.size()),
                    Catch::Contains("more than its compressed size can hold"));
}

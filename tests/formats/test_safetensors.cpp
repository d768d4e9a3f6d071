// The safetensors reader and writer (formats/safetensors.h): files built byte by byte from the format's
// description, and every way a header can lie about the file.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/safetensors.h"

using namespace parla::formats;

namespace {

// A file: the 8-byte little-endian length, the header text, then `data`.
std::string file_of(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

SafetensorsHeader parse_safetensors_bytes(const std::string& bytes) {
  return parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

std::string floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.begin(), s.size());
  return s;
}

}  // namespace

TEST_CASE("a safetensors file written by hand is read: names, types, shapes, ranges and metadata") {
  const std::string header =
      R"({"__metadata__": {"format": "pt", "note": "x"}, "b": {"dtype": "I8", "shape": [2], "data_offsets": [8, 10]},)"
      R"( "a": {"dtype": "F32", "shape": [1, 2], "data_offsets": [0, 8]}, "e": {"dtype": "BF16", "shape": [0, 3], "data_offsets": [10, 10]}})";
  const auto h = parse_safetensors_bytes(file_of(header, floats({1.5f, -2.0f}) + std::string("\x07\xf9", 2)));
  CHECK(h.data_start == 8 + header.size());
  CHECK(h.metadata.at("format") == "pt");
  CHECK(h.metadata.at("note") == "x");
  REQUIRE(h.tensors.size() == 3);
  CHECK(h.tensors[0].name == "a");  // in the order of the data
  CHECK(h.tensors[0].dtype == DType::F32);
  CHECK(h.tensors[0].shape == std::vector<int64_t>{1, 2});
  CHECK(h.tensors[0].end == 8);
  CHECK(h.tensors[1].name == "b");
  CHECK(h.tensors[1].dtype == DType::I8);
  CHECK(h.tensors[2].name == "e");
  CHECK(h.tensors[2].shape == std::vector<int64_t>{0, 3});
  CHECK(h.tensors[2].begin == h.tensors[2].end);
}

TEST_CASE("the writer's layout is read back, aligned: the data starts at a multiple of 8 and each tensor at one of "
          "its element size") {
  std::vector<TensorEntry> t = {{"z_bytes", DType::U8, {3}, 0, 0},
                                {"w", DType::F32, {2, 3}, 0, 0},
                                {"steps", DType::I64, {}, 0, 0},
                                {"half", DType::F16, {5}, 0, 0},
                                {"empty", DType::F32, {0}, 0, 0}};
  const std::map<std::string, std::string> meta = {{"parla_format", "2"}, {"text", "{\"a\": [1, \"\\u00e9\"]}"}};
  const std::string head = layout_safetensors(t, meta);
  CHECK(head.size() % 8 == 0);
  uint64_t data = 0;
  for (const auto& e : t) {
    CHECK(e.begin % dtype_size(e.dtype) == 0);
    data = std::max(data, e.end);
  }
  CHECK(t.front().name == "steps");  // 8-byte elements first
  const auto h = parse_safetensors_bytes(head + std::string(data, '\x5a'));
  CHECK(h.data_start == head.size());
  CHECK(h.metadata == meta);
  REQUIRE(h.tensors.size() == t.size());
  for (const auto& e : t) {
    auto it = std::find_if(h.tensors.begin(), h.tensors.end(), [&](const TensorEntry& x) { return x.name == e.name; });
    REQUIRE(it != h.tensors.end());
    CHECK(it->dtype == e.dtype);
    CHECK(it->shape == e.shape);
    CHECK(it->begin == e.begin);
    CHECK(it->end == e.end);
  }
}

TEST_CASE("the writer refuses two tensors with one name, and an empty name") {
  std::vector<TensorEntry> twice = {{"a", DType::F32, {1}, 0, 0}, {"a", DType::F32, {2}, 0, 0}};
  CHECK_THROWS_AS(layout_safetensors(twice, {}), parla::DataError);
  std::vector<TensorEntry> unnamed = {{"", DType::F32, {1}, 0, 0}};
  CHECK_THROWS_AS(layout_safetensors(unnamed, {}), parla::DataError);
}

TEST_CASE("a header that lies about the file is refused with what is wrong") {
  const std::string ok_tensor = R"("a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})";
  const std::string data = floats({1, 2});
  struct Case {
    std::string bytes, says;
  };
  std::string huge_length = file_of("{}", "");
  huge_length[7] = '\x01';  // a length of 2^56 + 2 for a 10-byte file
  const std::vector<Case> cases = {
      {std::string("\x02\x00\x00", 3), "too short"},
      {huge_length, "beyond the end of the file"},
      {file_of("[1, 2]", ""), "does not start with '{'"},
      {file_of("{\"a\": ", ""), "not valid JSON"},
      {file_of("{" + ok_tensor + "}", data.substr(0, 4)), "outside"},
      {file_of("{" + ok_tensor + "}", data + "xx"), "cover 8"},
      {file_of(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", data), "need 12"},
      {file_of(R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", data), "non-negative"},
      {file_of(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", data), "outside"},
      {file_of(R"({"a": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}})", data), "'C64'"},
      {file_of(R"({"a": {"dtype": "F32", "shape": [2]}})", data), "lacks"},
      {file_of(R"({"a": {"dtype": "F32", "shape": [4611686018427387904, 8], "data_offsets": [0, 8]}})", data),
       "overflows"},
      {file_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, )"
               R"("b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
               data.substr(0, 4)),
       "overlaps"},
      {file_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", data), "hole"},
      {file_of(R"({"a": {"dtype": "F32", "shape": [[[2]]], "data_offsets": [0, 8]}})", data), "deeper"},
      {file_of("{" + ok_tensor + ", " + ok_tensor + "}", data), "twice"},
      {file_of(R"({"__metadata__": {"k": 1}})", ""), "not a string"},
  };
  for (const auto& c : cases) {
    INFO(c.says);
    try {
      parse_safetensors_bytes(c.bytes);
      FAIL("accepted");
    } catch (const parla::DataError& e) {
      CHECK_THAT(e.what(), Catch::Contains(c.says));
    }
  }
}

TEST_CASE("a header deeper than the format is refused while it is parsed, however deep") {
  std::string deep = R"({"a": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  CHECK_THROWS_WITH(parse_safetensors_bytes(file_of(deep, "")), Catch::Contains("deeper"));
}

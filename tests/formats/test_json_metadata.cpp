// JSON inside model files (core/bounded_json.h through formats/ and models/checkpoint): a safetensors header parses in
// time linear in its tensors, and checkpoint metadata nested deep is one error naming the file, in a safetensors
// checkpoint and in an old TorchScript one.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/error.h"
#include "formats/safetensors.h"
#include "models/checkpoint.h"
#include "support/temp_dir.h"
#include "support/tiny_checkpoint.h"

using Catch::Contains;
using parla::testing::TempDir;

namespace {

std::string with_length(const std::string& header) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header;
}

std::string header_of(int tensors) {
  std::string h = "{\"__metadata__\":{\"format\":\"pt\"}";
  for (int i = 0; i < tensors; ++i)
    h += ",\"t" + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}";
  return with_length(h + "}");
}

double fastest_parse(const std::string& file, size_t tensors) {
  double best = 1e9;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::clock();
    const auto h = parla::formats::parse_safetensors(reinterpret_cast<const uint8_t*>(file.data()), file.size());
    best = std::min(best, double(std::clock() - t0) / CLOCKS_PER_SEC);
    REQUIRE(h.tensors.size() == tensors);
  }
  return best;
}

// `path` (a safetensors checkpoint) with its __metadata__ entry `key` replaced by `value`.
void set_metadata(const std::string& path, const std::string& key, const std::string& value) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  header["__metadata__"][key] = value;
  std::ofstream(path, std::ios::binary) << with_length(header.dump()) << bytes.substr(8 + n);
}

std::string deep_object(int levels) {
  std::string s;
  for (int i = 0; i < levels; ++i) s += "{\"a\":";
  s += "1";
  return s + std::string(static_cast<size_t>(levels), '}');
}

}  // namespace

TEST_CASE("a safetensors header parses in time linear in its tensors") {
  // nlohmann's parse with a callback rescanned the earlier tensors as each one ended: 50,000 tensors took 29 s.
  const std::string small = header_of(6250), large = header_of(50000);
  const double t_small = std::max(fastest_parse(small, 6250), 1e-4), t_large = fastest_parse(large, 50000);
  INFO("6,250 tensors: " << t_small << " s; 50,000: " << t_large << " s");
  CHECK(t_large < 24 * t_small);
}

TEST_CASE("a safetensors tensor entry that names a key twice is refused") {
  const std::string file =
      with_length(R"({"a": {"dtype": "F32", "dtype": "I8", "shape": [0], "data_offsets": [0, 0]}})");
  CHECK_THROWS_WITH(parla::formats::parse_safetensors(reinterpret_cast<const uint8_t*>(file.data()), file.size()),
                    Contains("safetensors header") && Contains("\"dtype\" twice"));
}

TEST_CASE("checkpoint metadata nested 150,000 deep is one error naming the file, in either checkpoint format") {
  TempDir dir("deep-metadata");
  const auto good = dir.file("good.pt");
  parla::testing::write_tiny_checkpoint(good, 1);
  const std::string deep = "{\"config\":" + deep_object(150000) + "}";
  {
    const auto path = dir.file("deep-meta.pt");
    std::filesystem::copy_file(good, path);
    set_metadata(path, "parla_meta", deep);
    CHECK_THROWS_WITH(parla::models::read_meta(path), Contains(path) && Contains("deeper than 64"));
  }
  {
    const auto path = dir.file("deep-pieces.pt");
    std::filesystem::copy_file(good, path);
    set_metadata(path, "parla_src_pieces", "[[[\"a\"]]]");
    CHECK_THROWS_WITH(parla::models::read_meta(path), Contains(path) && Contains("parla_src_pieces"));
  }
  {
    // The TorchScript archive of parla's first checkpoint format, with only its two metadata entries.
    const auto path = dir.file("legacy.pt");
    torch::serialize::OutputArchive root;
    root.write("parla_format", c10::IValue(int64_t{1}));
    root.write("parla_meta", c10::IValue(deep));
    root.save_to(path);
    CHECK_THROWS_WITH(parla::models::read_meta(path), Contains(path) && Contains("deeper than 64"));
  }
}

// Reading TorchScript archives (parla's checkpoints before issue 35) as data: files written by LibTorch's own
// OutputArchive, read by the strict reader and compared with what LibTorch's InputArchive reads from them (the
// oracle, used here on files the test wrote itself); and the same files edited to carry code.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <sstream>

#include <torch/torch.h>

#include "core/error.h"
#include "formats/mapped_file.h"
#include "formats/torchscript_archive.h"
#include "support/temp_dir.h"
#include "support/zip_edit.h"

using namespace parla::formats;
using parla::testing::TempDir;

namespace {

TorchScriptArchive read(const std::string& path) {
  auto m = MappedFile::open(path);
  return read_torchscript_archive(m->data(), m->size());
}

torch::Tensor as_torch(const ArchiveTensor& t) {
  const auto type = t.dtype == DType::F32 ? torch::kFloat : t.dtype == DType::I64 ? torch::kLong : torch::kByte;
  auto base = torch::from_blob(const_cast<char*>(t.storage->data()),
                               {static_cast<int64_t>(t.storage->size()) / static_cast<int64_t>(torch::elementSize(type))},
                               torch::TensorOptions().dtype(type));
  return base.as_strided(t.sizes, t.strides, t.offset).clone();
}

// An archive with nested sub-archives, tensors of three types (one a strided view), strings, an int and a float.
std::string write_archive(const TempDir& dir) {
  torch::serialize::OutputArchive root, sub, deeper;
  root.write("format", c10::IValue(int64_t{1}));
  root.write("meta", c10::IValue(std::string("{\"a\": 1}")));
  root.write("rate", c10::IValue(0.125));
  root.write("w", torch::arange(12, torch::kFloat).view({3, 4}));
  root.write("view", torch::arange(20, torch::kFloat).view({4, 5}).slice(1, 1, 4).t(), /*is_buffer=*/true);
  deeper.write("ids", torch::tensor({5, -7, 9}, torch::kLong));
  deeper.write("bytes", torch::tensor({1, 255}, torch::kUInt8), true);
  sub.write("layer.0.weight", torch::ones({2, 2}));
  sub.write("deeper", deeper);
  root.write("sub", sub);
  const auto path = dir.file("legacy.pt");
  root.save_to(path);
  return path;
}

}  // namespace

TEST_CASE("a TorchScript archive written by LibTorch is read as LibTorch reads it, without running it") {
  TempDir dir("ts-archive");
  const auto path = write_archive(dir);
  const auto a = read(path);
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& t : a.tensors) tensors[t.name] = as_torch(t);
  std::map<std::string, std::string> values(a.values.begin(), a.values.end());
  CHECK(values.at("format") == "1");
  CHECK(values.at("meta") == "{\"a\": 1}");
  CHECK(values.at("rate") == "0.125");

  torch::serialize::InputArchive oracle, sub, deeper;  // LibTorch's own reader, on the file written above
  oracle.load_from(path);
  oracle.read("sub", sub);
  sub.read("deeper", deeper);
  torch::Tensor w, view, one, ids, bytes;
  oracle.read("w", w);
  oracle.read("view", view, true);
  sub.read("layer.0.weight", one);
  deeper.read("ids", ids);
  deeper.read("bytes", bytes, true);
  REQUIRE(tensors.size() == 5);
  CHECK(tensors.at("w").equal(w));
  CHECK(tensors.at("view").equal(view));
  CHECK(tensors.at("sub.layer.0.weight").equal(one));
  CHECK(tensors.at("sub.deeper.ids").equal(ids));
  CHECK(tensors.at("sub.deeper.bytes").equal(bytes));
}

TEST_CASE("an archive whose code defines __setstate__ (printing, or looping forever) is refused within a second, "
          "naming the method's file and line") {
  TempDir dir("ts-hostile");
  for (const char* body : {"print(\"EVIL: code ran\")", "while True:\n      pass"}) {
    INFO(body);
    const auto path = write_archive(dir);
    parla::testing::edit_zip_entry(path, "code/__torch__.py", [&](std::string code) {
      return code + "  def __setstate__(self, state: Tuple[int, str]) -> None:\n    " + body + "\n";
    });
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(read(path), Catch::Contains("code/__torch__.py") && Catch::Contains("defines a method"));
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  }
}

TEST_CASE("a tensor edited to reach past its storage, a missing storage and a big-endian archive are refused") {
  TempDir dir("ts-edited");
  // The strided "view" [3, 4] with strides (1, 5): editing its first stride from 1 to 100 reaches far past its
  // storage of 20 elements.
  {
    const auto path = write_archive(dir);
    parla::testing::edit_zip_entry(path, "data.pkl", [](std::string p) {
      const std::string strides("(K\x01K\x05t", 6);
      const size_t at = p.find(strides);
      REQUIRE(at != std::string::npos);
      REQUIRE(p.find(strides, at + 1) == std::string::npos);
      p[at + 2] = 100;
      return p;
    });
    CHECK_THROWS_WITH(read(path), Catch::Contains("reaches element"));
  }
  {
    const auto path = write_archive(dir);
    // LibTorch 2 writes a byteorder entry ("little"), 1.13 none.
    const std::string pkl = parla::testing::zip_entry_name(path, "/data.pkl");
    parla::testing::set_zip_entry(path, pkl.substr(0, pkl.size() - 8) + "byteorder", "big");
    CHECK_THROWS_WITH(read(path), Catch::Contains("big-endian"));
  }
  {
    const auto path = write_archive(dir);
    parla::testing::edit_zip_entry(path, "data.pkl", [](std::string p) {
      const std::string key("X\x01\x00\x00\x00" "0", 6);  // the first storage's key, '0', renamed '9'
      const size_t at = p.find(key);
      REQUIRE(at != std::string::npos);
      p[at + 5] = '9';
      return p;
    });
    CHECK_THROWS_WITH(read(path), Catch::Contains("lacks the data of storage '9'"));
  }
}

TEST_CASE("a zip that is not a TorchScript archive, and bytes that are not a zip, are refused") {
  TempDir dir("ts-foreign");
  const auto path = write_archive(dir);
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  const std::string half = bytes.substr(0, bytes.size() / 2);
  CHECK_THROWS_WITH(read_torchscript_archive(reinterpret_cast<const uint8_t*>(half.data()), half.size()),
                    Catch::Contains("zip"));
  CHECK(looks_like_zip(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  CHECK_FALSE(looks_like_zip(reinterpret_cast<const uint8_t*>("{\"a\""), 4));
}

// Reading TorchScript archives (parla's checkpoints before issue 35) as data: files written by LibTorch's own
// OutputArchive, read by the strict reader and compared with what LibTorch's InputArchive reads from them (the
// oracle, used here on files the test wrote itself); and the same files edited to carry code.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <vector>

#include <torch/torch.h>
#include <zip.h>

#include "core/error.h"
#include "formats/mapped_file.h"
#include "formats/torchscript_archive.h"
#include "formats/zip_archive.h"
#include "support/temp_dir.h"
#include "support/zip_edit.h"

using namespace parla::formats;
using parla::testing::TempDir;

namespace {

// The storages view the mapped file where they can, so it stays mapped for the rest of the run.
TorchScriptArchive read(const std::string& path) {
  static std::vector<decltype(MappedFile::open(path))> mapped;
  mapped.push_back(MappedFile::open(path));
  return read_torchscript_archive(mapped.back()->data(), mapped.back()->size());
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

TEST_CASE("a LibTorch archive's storages are views of the file, each read once and checked against its CRC") {
  TempDir dir("ts-in-place");
  const auto path = write_archive(dir);
  auto m = MappedFile::open(path);
  const auto* begin = reinterpret_cast<const char*>(m->data());
  std::vector<std::pair<const void*, size_t>> checked;
  const auto a = read_torchscript_archive(m->data(), m->size(),
                                          [&](const void* p, size_t n) { checked.emplace_back(p, n); });
  std::set<const StorageBytes*> storages;
  for (const auto& t : a.tensors) {
    INFO(t.name);
    CHECK(t.storage->in_place());
    CHECK(t.storage->data() >= begin);
    CHECK(t.storage->data() + t.storage->size() <= begin + m->size());
    storages.insert(t.storage.get());
  }
  // Every storage once (tensors may share one), and exactly its bytes.
  REQUIRE(checked.size() == storages.size());
  for (const auto* s : storages)
    CHECK(std::count(checked.begin(), checked.end(), std::make_pair<const void*, size_t>(s->data(), s->size())) == 1);

  // The zip reader's view of each stored entry is what libzip reads; compressed entries (LibTorch deflates code/)
  // have none.
  ZipArchive zip(m->data(), m->size());
  int stored = 0;
  for (size_t i = 0; i < zip.entries().size(); ++i) {
    INFO(zip.entries()[i].name);
    const auto view = zip.stored_bytes(i, m->size());
    if (zip.entries()[i].stored) {
      REQUIRE(view);
      CHECK(std::string(*view) == zip.read(i, m->size()));
      ++stored;
    } else {
      CHECK(!view);
    }
  }
  CHECK(stored >= 6);  // data.pkl, version and the five tensors' storages

  // A deflated entry has no view: it is read (inflated) through libzip.
  const auto mixed = dir.file("mixed.zip");
  {
    int err = 0;
    zip_t* z = zip_open(mixed.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
    REQUIRE(z);
    const std::string plain(5000, 'a'), packed(5000, 'b');
    const auto a_index = zip_file_add(z, "stored", zip_source_buffer(z, plain.data(), plain.size(), 0), 0);
    const auto b_index = zip_file_add(z, "deflated", zip_source_buffer(z, packed.data(), packed.size(), 0), 0);
    REQUIRE(a_index >= 0);
    REQUIRE(b_index >= 0);
    zip_set_file_compression(z, static_cast<zip_uint64_t>(a_index), ZIP_CM_STORE, 0);
    zip_set_file_compression(z, static_cast<zip_uint64_t>(b_index), ZIP_CM_DEFLATE, 9);
    REQUIRE(zip_close(z) == 0);
  }
  auto mm = MappedFile::open(mixed);
  ZipArchive both(mm->data(), mm->size());
  const auto s_index = both.find("stored"), d_index = both.find("deflated");
  REQUIRE(s_index);
  REQUIRE(d_index);
  CHECK(!both.entries()[*d_index].stored);
  CHECK(!both.stored_bytes(*d_index, mm->size()));
  CHECK(both.read(*d_index, mm->size()) == std::string(5000, 'b'));
  const auto view = both.stored_bytes(*s_index, mm->size());
  REQUIRE(view);
  CHECK(std::string(*view) == std::string(5000, 'a'));
  CHECK(static_cast<const void*>(view->data()) > static_cast<const void*>(mm->data()));
}

TEST_CASE("a storage whose bytes were changed inside the file, behind the zip's back, is refused by its CRC") {
  TempDir dir("ts-crc");
  const auto path = write_archive(dir);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  // "w" is arange(12) as float: 5.0f, 6.0f, 7.0f follow each other in its storage only.
  const float run[3] = {5.0f, 6.0f, 7.0f};
  const size_t at = bytes.find(std::string(reinterpret_cast<const char*>(run), sizeof(run)));
  REQUIRE(at != std::string::npos);
  bytes[at] ^= 1;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  CHECK_THROWS_WITH(read(path), Catch::Contains("damaged"));
}

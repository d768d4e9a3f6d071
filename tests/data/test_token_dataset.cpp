#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>

#include <torch/torch.h>

#include "core/error.h"
#include "core/config.h"
#include "data/batch.h"
#include "text/special_ids.h"
#include "data/token_dataset.h"
#include "data/token_dataset_writer.h"
#include "support/temp_dir.h"

using Catch::Matchers::Contains;
using parla::data::TokenDataset;
using parla::data::TokenDatasetWriter;

namespace {
std::vector<std::vector<int>> random_sentences(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int>> out(n);
  for (auto& s : out) {
    s.resize(rng() % 30);  // includes empty sentences
    for (auto& id : s) id = static_cast<int>(rng() % vocab);
  }
  return out;
}

void write(const std::string& prefix, const std::vector<std::vector<int>>& sents, int width) {
  TokenDatasetWriter w(prefix, width);
  for (const auto& s : sents) w.add(s);
  w.finish();
}
}  // namespace

TEST_CASE("token width is uint16 when the vocabulary fits, else uint32") {
  CHECK(parla::data::token_bytes_for(8000) == 2);
  CHECK(parla::data::token_bytes_for(65536) == 2);
  CHECK(parla::data::token_bytes_for(65537) == 4);
}

TEST_CASE("written sentences read back identically, in both token widths") {
  parla::testing::TempDir dir("token_dataset");
  for (auto [width, vocab] : {std::pair{2, 65536}, std::pair{4, 1 << 20}}) {
    INFO("width " << width);
    auto sents = random_sentences(500, vocab, 7 + width);
    std::string prefix = dir.file("train.de" + std::to_string(width));
    write(prefix, sents, width);
    auto d = TokenDataset::open(prefix);
    REQUIRE(d.size() == sents.size());
    CHECK(d.token_bytes() == width);
    size_t total = 0;
    for (size_t i = 0; i < sents.size(); ++i) {
      REQUIRE(d.length(i) == sents[i].size());
      auto got = d.get(i);
      REQUIRE(std::vector<int>(got.begin(), got.end()) == sents[i]);
      total += sents[i].size();
    }
    CHECK(d.total_tokens() == total);
    CHECK(std::filesystem::file_size(prefix + ".bin") == total * width);
    CHECK_THROWS_AS(d.length(sents.size()), std::out_of_range);
  }
}

TEST_CASE("an empty dataset is valid") {
  parla::testing::TempDir dir("token_dataset");
  write(dir.file("e"), {}, 2);
  CHECK(TokenDataset::open(dir.file("e")).size() == 0);
}

TEST_CASE("ids that do not fit the token width are refused") {
  parla::testing::TempDir dir("token_dataset");
  TokenDatasetWriter w(dir.file("x"), 2);
  CHECK_THROWS_AS(w.add({1, 65536}), parla::DataError);
  CHECK_THROWS_AS(w.add({-1}), parla::DataError);
}

TEST_CASE("missing, truncated or corrupt files are data errors naming the file") {
  parla::testing::TempDir dir("token_dataset");
  std::string p = dir.file("train.en");
  write(p, random_sentences(50, 1000, 3), 2);
  CHECK_THROWS_WITH(TokenDataset::open(dir.file("nope")), Contains("nope.idx"));
  SECTION("truncated token file") {
    std::filesystem::resize_file(p + ".bin", std::filesystem::file_size(p + ".bin") - 2);
    CHECK_THROWS_WITH(TokenDataset::open(p), Contains("train.en.bin") && Contains("truncated"));
  }
  SECTION("truncated index") {
    std::filesystem::resize_file(p + ".idx", std::filesystem::file_size(p + ".idx") - 8);
    CHECK_THROWS_WITH(TokenDataset::open(p), Contains("train.en.idx"));
  }
  SECTION("not an index") {
    std::ofstream(p + ".idx", std::ios::binary) << "hello world, this is not an index file at all";
    CHECK_THROWS_WITH(TokenDataset::open(p), Contains("not a parla dataset index"));
  }
  SECTION("decreasing offsets") {
    std::fstream f(p + ".idx", std::ios::in | std::ios::out | std::ios::binary);
    uint64_t big = 1000000;
    f.seekp(parla::data::kIndexHeaderBytes + 8 * 5);
    f.write(reinterpret_cast<const char*>(&big), 8);
    f.close();
    CHECK_THROWS_AS(TokenDataset::open(p), parla::DataError);
  }
}

TEST_CASE("dataset info comes from meta.json, and a missing key is named") {
  parla::testing::TempDir dir("token_dataset");
  CHECK_THROWS_WITH(parla::data::read_dataset_info(dir.path().string()), Contains("meta.json"));
  dir.write("meta.json", R"({"format": "parla-dataset", "src_lang": "de", "tgt_lang": "en",
                            "vocab": {"joint": true, "src_size": 100, "tgt_size": 100, "src_model": "spm.model"}})");
  CHECK_THROWS_WITH(parla::data::read_dataset_info(dir.path().string()), Contains("vocab.tgt_model"));
  dir.write("meta.json", R"({"format": "parla-dataset", "src_lang": "de", "tgt_lang": "en",
                            "vocab": {"joint": true, "src_size": 100, "tgt_size": 100, "src_model": "spm.model",
                                      "tgt_model": "spm.model"}})");
  auto info = parla::data::read_dataset_info(dir.path().string());
  CHECK(info.src_lang == "de");
  CHECK(info.src_vocab_size == 100);
  CHECK(info.tgt_spm_path == dir.path().string() + "/spm.model");
  write(dir.file("train.de"), random_sentences(10, 100, 1), 2);
  write(dir.file("train.en"), random_sentences(11, 100, 2), 2);
  CHECK_THROWS_WITH(parla::data::open_split(info, "train"), Contains("10 source but 11 target"));
  CHECK_THROWS_AS(parla::data::open_split(info, "valid"), parla::DataError);

  // Ids are checked against the vocabulary once, on the host, when a split opens (not per lookup on a device).
  auto sentences = random_sentences(10, 100, 3);
  write(dir.file("test.de"), sentences, 2);
  write(dir.file("test.en"), sentences, 2);
  CHECK(parla::data::open_split(info, "test").src.max_id() < 100);
  sentences[4].push_back(100);  // one past the end
  write(dir.file("test.en"), sentences, 2);
  CHECK_THROWS_WITH(parla::data::open_split(info, "test"),
                    Contains(dir.file("test.en") + ".bin': token id 100") && Contains("vocab.tgt_size"));
}

TEST_CASE("a batch collated with data.pad_to_multiple 8 holds the exact batch in its corner and padding around it") {
  parla::testing::TempDir dir("pad-multiple");
  const auto sentences = random_sentences(12, 100, 4);
  write(dir.file("s.de"), sentences, 2);
  write(dir.file("s.en"), random_sentences(12, 100, 5), 2);
  parla::data::ParallelSplit split{TokenDataset::open(dir.file("s.de")), TokenDataset::open(dir.file("s.en"))};
  const std::vector<int64_t> ids = {0, 3, 5, 7, 11};
  const auto exact = parla::data::collate_parallel(split, ids, parla::kBosId);
  const auto padded = parla::data::collate_parallel(split, ids, parla::kBosId, 8);
  for (const auto* t : {&padded.src, &padded.tgt_in, &padded.tgt_out}) CHECK(t->size(1) % 8 == 0);
  CHECK(padded.src.size(1) - exact.src.size(1) < 8);
  CHECK(torch::equal(padded.src.narrow(1, 0, exact.src.size(1)), exact.src));
  CHECK(torch::equal(padded.tgt_out.narrow(1, 0, exact.tgt_out.size(1)), exact.tgt_out));
  CHECK(padded.src.narrow(1, exact.src.size(1), padded.src.size(1) - exact.src.size(1)).eq(parla::kPadId).all().item<bool>());
  CHECK(padded.src_tokens == exact.src_tokens);
  CHECK(padded.tgt_tokens == exact.tgt_tokens);
}

// parla-train quantize (train/quantize_checkpoint.h): a float checkpoint written as int8 round-trips its int8
// weights exactly, is refused as input once quantized, and is at least 3.5x smaller than the shared model.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "models/checkpoint.h"
#include "models/factory.h"
#include "models/int8_quantization.h"
#include "models/tiny_config.h"
#include "support/seq2seq.h"
#include "support/temp_dir.h"
#include "train/quantize_checkpoint.h"

namespace quantize_checkpoint_tests {

using namespace parla::models;
using parla::testing::TempDir;
using parla::testing::log_probs;
using parla::testing::meta_of;

TEST_CASE("an int8 checkpoint round-trips its int8 weights exactly", "[int8]") {
  TempDir dir("int8-checkpoint");
  torch::manual_seed(6);
  for (bool tie : {true, false}) {
    auto cfg = parla::testing::tiny_transformer();
    cfg.d_model = 64;
    cfg.ffn_dim = 256;
    cfg.tie_output = tie;
    auto model = build_seq2seq(cfg, 500, 500);
    auto float_path = dir.file("float.pt"), int8_path = dir.file("int8.pt");
    save_checkpoint(float_path, *model, meta_of(cfg));
    parla::train::quantize_checkpoint(float_path, int8_path);
    quantize_int8(*model);
    auto loaded = load_seq2seq(int8_path);
    CHECK(!loaded.meta.int8.empty());
    CHECK(loaded.meta.info["quantized_from"] == float_path);
    auto a = int8_weights(*model), b = int8_weights(*loaded.model);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].first == b[i].first);
      CHECK(torch::equal(a[i].second->codes(), b[i].second->codes()));
      CHECK(torch::equal(a[i].second->scales, b[i].second->scales));
    }
    auto src = torch::randint(4, 500, {3, 8}), tgt = torch::randint(4, 500, {3, 6});
    CHECK(torch::equal(log_probs(*model, src, tgt), log_probs(*loaded.model, src, tgt)));
    // An int8 checkpoint cannot be quantized again, trained or averaged (load_weights).
    auto again = dir.file("again.pt");
    CHECK_THROWS_AS(parla::train::quantize_checkpoint(int8_path, again), parla::DataError);
    CHECK(!std::filesystem::exists(again));
    auto fresh = build_seq2seq(cfg, 500, 500);
    try {
      load_weights(int8_path, *fresh);
      FAIL("load_weights accepted an int8 checkpoint");
    } catch (const parla::DataError& e) {
      CHECK(std::string(e.what()).find(int8_path) != std::string::npos);
      CHECK(std::string(e.what()).find("int8") != std::string::npos);
    }
  }
}


TEST_CASE("the trained Multi30k model's int8 checkpoint is at least 3.5x smaller and decodes like in-memory int8",
          "[int8]") {
  TempDir dir("int8-multi30k");
  const std::string path = std::string(PARLA_SHARED_DIR) + "/models/multi30k-en-de-small/average.pt";
  parla::train::quantize_checkpoint(path, dir.file("int8.pt"));
  const double ratio = double(std::filesystem::file_size(path)) / double(std::filesystem::file_size(dir.file("int8.pt")));
  INFO("float/int8 size " << ratio);
  CHECK(ratio >= 3.5);  // the target
  auto loaded = load_seq2seq(dir.file("int8.pt"));
  auto in_memory = load_seq2seq(path);
  quantize_int8(*in_memory.model);
  auto src = torch::randint(4, 8000, {2, 12}), tgt = torch::randint(4, 8000, {2, 9});
  CHECK(torch::equal(log_probs(*loaded.model, src, tgt), log_probs(*in_memory.model, src, tgt)));
}


}  // namespace quantize_checkpoint_tests

// int8 quantization of whole models (models/int8_quantization.h) and int8 checkpoints: what is quantized, how close
// a trained model stays to its float self, round trips, and what refuses int8.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "runtime/runtime_device.h"
#include "models/checkpoint.h"
#include "models/factory.h"
#include "models/int8_quantization.h"
#include "models/tensor_archive.h"
#include "models/tiny_config.h"
#include "support/cuda.h"
#include "support/seq2seq.h"
#include "support/temp_dir.h"
#include "text/sentencepiece_vocab.h"

using namespace parla::models;
using parla::testing::TempDir;
using parla::testing::log_probs;
using parla::testing::meta_of;
using parla::kBosId;
using parla::kEosId;

namespace {

// Names of the float weights int8 decoding is documented to replace: every projection and feed-forward layer,
// the embedding tables and the output projection; found by name, independently of the module walk.
std::set<std::string> expected_int8_names(Seq2SeqModel& model) {
  std::set<std::string> names;
  auto ends_with = [](const std::string& s, const std::string& e) {
    return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
  };
  for (const auto& p : model.named_parameters()) {
    const auto& n = p.key();
    for (const char* e : {"proj.weight", "fc1.weight", "fc2.weight", "embed.weight", "bridge.weight",
                          "combine.weight", "output.weight", "w1.weight", "w2.weight", "v.weight", "attention.w.weight"})
      if (ends_with(n, e)) names.insert(n);
    if (n == "output_weight") names.insert(n);
  }
  return names;
}

std::vector<std::vector<int64_t>> read_ids(const std::string& path, const parla::text::SentencePieceVocab& vocab,
                                           size_t count) {
  std::ifstream in(path);
  std::vector<std::vector<int64_t>> out;
  std::string line;
  while (out.size() < count && std::getline(in, line)) {
    auto ids = vocab.encode(line);
    out.emplace_back(ids.begin(), ids.end());
  }
  return out;
}

}  // namespace

TEST_CASE("quantize_int8 replaces every linear layer, embedding table and output projection, and frees their floats",
          "[int8]") {
  for (auto cfg : {parla::testing::tiny_transformer(), parla::testing::tiny_rnn()}) {
    for (bool tie : {true, false}) {
      for (bool share : {true, false}) {
        cfg.tie_output = tie;
        cfg.share_embeddings = share;
        auto model = build_seq2seq(cfg, 24, 24);
        const auto expected = expected_int8_names(*model);
        quantize_int8(*model);
        std::set<std::string> got;
        for (const auto& w : int8_weights(*model)) got.insert(w.first);
        INFO(parla::config::name_of(cfg.type) << " tie " << tie << " share " << share);
        CHECK(got == expected);
        for (const auto& p : model->named_parameters())
          if (expected.count(p.key())) CHECK(p.value().stride(0) == 0);  // released: one element, zero strides
        quantize_int8(*model);  // idempotent
        CHECK(int8_weights(*model).size() == expected.size());
      }
    }
  }
}

TEST_CASE("a quantized random model's probabilities stay within 0.02 of its float self's", "[int8]") {
  torch::manual_seed(5);
  auto cfg = parla::testing::tiny_transformer();
  cfg.dropout = 0;
  auto model = build_seq2seq(cfg, 30, 30);
  auto src = torch::randint(4, 30, {4, 9}), tgt = torch::randint(4, 30, {4, 7});
  auto before = log_probs(*model, src, tgt);
  quantize_int8(*model);
  auto after = log_probs(*model, src, tgt);
  CHECK(torch::isfinite(after).all().item<bool>());
  // Probabilities, not log-probabilities: 8 bits per weight and activation keep them within a few percent.
  CHECK((after.exp() - before.exp()).abs().max().item<double>() < 0.02);
}

TEST_CASE("the trained Multi30k model in int8 keeps its log-probabilities of the reference translations", "[int8]") {
  const std::string dir = std::string(PARLA_SHARED_DIR);
  auto fp32 = load_seq2seq(dir + "/models/multi30k-en-de-small/average.pt");
  auto int8 = load_seq2seq(dir + "/models/multi30k-en-de-small/average.pt");
  quantize_int8(*int8.model);
  auto src_vocab = parla::text::SentencePieceVocab::from_serialized(fp32.meta.src_spm);
  auto tgt_vocab = parla::text::SentencePieceVocab::from_serialized(fp32.meta.tgt_spm);
  auto sources = read_ids(dir + "/data/multi30k/test_2016_flickr.en", src_vocab, 64);
  auto targets = read_ids(dir + "/data/multi30k/test_2016_flickr.de", tgt_vocab, 64);
  REQUIRE(sources.size() == 64);
  double sum_abs = 0, nll32 = 0, nll8 = 0;
  int64_t tokens = 0, same_argmax = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    auto s = sources[i], t = targets[i];
    s.push_back(kEosId);
    std::vector<int64_t> in{kBosId}, out;
    for (auto id : t) in.push_back(id), out.push_back(id);
    in.pop_back();
    out.back() = t.back();
    in.resize(out.size());
    auto src = torch::tensor(s).view({1, -1}), tgt_in = torch::tensor(in).view({1, -1});
    auto a = log_probs(*fp32.model, src, tgt_in)[0], b = log_probs(*int8.model, src, tgt_in)[0];
    for (size_t j = 0; j < out.size(); ++j) {
      const double la = a[j][out[j]].item<double>(), lb = b[j][out[j]].item<double>();
      sum_abs += std::fabs(la - lb);
      nll32 -= la;
      nll8 -= lb;
      same_argmax += a[j].argmax().item<int64_t>() == b[j].argmax().item<int64_t>();
      ++tokens;
    }
  }
  const double mean_abs = sum_abs / tokens;
  INFO("tokens " << tokens << " mean |dlogp| " << mean_abs << " ppl fp32 " << std::exp(nll32 / tokens) << " int8 "
                 << std::exp(nll8 / tokens) << " argmax agreement " << double(same_argmax) / tokens);
  CHECK(mean_abs < 0.05);                                        // nats per reference token
  CHECK(std::fabs(nll8 - nll32) / tokens < 0.01);                // perplexity within 1%
  CHECK(double(same_argmax) / tokens > 0.97);
}

TEST_CASE("int8 is a decoding precision for the CPU: on a GPU, or for training, it is a config error naming the key",
          "[int8]") {
  using parla::runtime::resolve_precision;
  CHECK(resolve_precision(parla::Precision::kInt8, torch::Device(torch::kCPU), "decoding.precision") == torch::kFloat);
  try {
    resolve_precision(parla::Precision::kInt8, torch::Device(torch::kCUDA, 0), "decoding.precision");
    FAIL("int8 on cuda:0 accepted");
  } catch (const parla::ConfigError& e) {
    CHECK(std::string(e.what()).find("decoding.precision") != std::string::npos);
    CHECK(std::string(e.what()).find("cuda:0") != std::string::npos);
  }
  CHECK_THROWS_AS(resolve_precision(parla::Precision::kInt8, torch::Device(torch::kCPU), "training.precision"), parla::ConfigError);
  parla::config::ConfigBuilder b;
  CHECK_THROWS_AS(b.set("training.precision", "int8", "test"), parla::ConfigError);
  CHECK_NOTHROW(b.set("decoding.precision", "int8", "test"));
}

TEST_CASE("an int8 checkpoint does not load onto a GPU: a config error naming runtime.device", "[int8][cuda]") {
  PARLA_REQUIRE_CUDA();
  TempDir dir("int8-device");
  auto cfg = parla::testing::tiny_transformer();
  auto model = build_seq2seq(cfg, 20, 20);
  quantize_int8(*model);
  save_checkpoint(dir.file("q.pt"), *model, meta_of(cfg));
  try {
    load_seq2seq(dir.file("q.pt"), torch::Device(torch::kCUDA, 0));
    FAIL("an int8 checkpoint loaded onto cuda:0");
  } catch (const parla::ConfigError& e) {
    CHECK(std::string(e.what()).find("runtime.device") != std::string::npos);
  }
}

TEST_CASE("a float checkpoint quantized while it loads is the float load quantized after: every weight, every output",
          "[int8]") {
  TempDir dir("int8-while-loading");
  torch::manual_seed(7);
  std::vector<std::string> paths;
  for (bool tie : {true, false}) {  // safetensors, as parla writes them now; Transformers and an RNN
    auto cfg = parla::testing::tiny_transformer();
    cfg.d_model = 64;
    cfg.ffn_dim = 256;
    cfg.tie_output = tie;
    auto model = build_seq2seq(cfg, 500, 500);
    paths.push_back(dir.file(tie ? "tied.pt" : "untied.pt"));
    save_checkpoint(paths.back(), *model, meta_of(cfg));
  }
  {
    auto cfg = parla::testing::tiny_rnn();
    auto model = build_seq2seq(cfg, 500, 500);
    paths.push_back(dir.file("rnn.pt"));
    save_checkpoint(paths.back(), *model, meta_of(cfg));
  }
  // A TorchScript archive (the format before safetensors), whose storages are views of the file too.
  paths.push_back(std::string(PARLA_SHARED_DIR) + "/models/multi30k-en-de-small/average.pt");
  for (const auto& path : paths) {
    INFO(path);
    if (!std::filesystem::exists(path)) continue;  // the shared model: only where ../shared is present
    auto after = load_seq2seq(path);
    quantize_int8(*after.model);
    auto streamed = load_seq2seq(path, torch::kCPU, {}, /*int8=*/true);
    auto a = int8_weights(*after.model), b = int8_weights(*streamed.model);
    REQUIRE(a.size() == b.size());
    REQUIRE(!a.empty());
    for (size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].first == b[i].first);
      CHECK(torch::equal(a[i].second->codes(), b[i].second->codes()));
      CHECK(torch::equal(a[i].second->scales, b[i].second->scales));
    }
    // Everything left in float (layer norms, biases) loaded as before.
    auto pa = after.model->named_parameters(), pb = streamed.model->named_parameters();
    REQUIRE(pa.size() == pb.size());
    for (const auto& p : pa) {
      INFO(p.key());
      CHECK(p.value().sizes() == pb[p.key()].sizes());
      if (p.value().numel() > 0) CHECK(torch::equal(p.value(), pb[p.key()]));
    }
    const int64_t vocab = after.meta.src_vocab_size;
    auto src = torch::randint(4, std::min<int64_t>(vocab, 500), {3, 8});
    auto tgt = torch::randint(4, std::min<int64_t>(after.meta.tgt_vocab_size, 500), {3, 6});
    CHECK(torch::equal(log_probs(*after.model, src, tgt), log_probs(*streamed.model, src, tgt)));
  }
}

TEST_CASE("a checkpoint whose weights do not fit its config is refused naming the file and the weight, loaded in "
          "float or quantized while loading", "[int8]") {
  TempDir dir("int8-mismatch");
  auto cfg = parla::testing::tiny_transformer();
  cfg.d_model = 64;
  cfg.ffn_dim = 256;
  auto model = build_seq2seq(cfg, 500, 500);
  auto claimed = cfg;
  claimed.ffn_dim = 128;  // the feed-forward weights in the file are 256 wide, the config says 128
  const auto path = dir.file("mismatch.pt");
  save_checkpoint(path, *model, meta_of(claimed));
  for (bool int8 : {false, true}) {
    INFO("int8 " << int8);
    try {
      load_seq2seq(path, torch::kCPU, {}, int8);
      FAIL("a checkpoint that does not fit its config loaded");
    } catch (const parla::DataError& e) {
      const std::string what = e.what();
      CHECK(what.find(path) != std::string::npos);
      CHECK(what.find("does not match the model") != std::string::npos);
      CHECK(what.find("ffn.fc") != std::string::npos);
    }
  }
}

TEST_CASE("an int8 checkpoint's matrices are checked against the config before any is packed", "[int8]") {
  TempDir dir("int8-shapes");
  auto cfg = parla::testing::tiny_transformer();
  cfg.d_model = 64;
  cfg.ffn_dim = 256;
  auto model = build_seq2seq(cfg, 500, 500);
  quantize_int8(*model);
  const std::string fc1 = "encoder.layers.0.ffn.fc1.weight";
  REQUIRE(int8_weight_shape(*model, fc1) == std::vector<int64_t>{256, 64});
  CHECK(int8_weight_shape(*model, "encoder.layers.0.no_such.weight").empty());

  SECTION("a config narrower than the stored matrices") {
    auto claimed = cfg;
    claimed.ffn_dim = 128;
    const auto path = dir.file("narrow.pt");
    save_checkpoint(path, *model, meta_of(claimed));
    CHECK_THROWS_WITH(load_seq2seq(path, torch::kCPU),
                      Catch::Contains(path) && Catch::Contains("does not match the model") &&
                          Catch::Contains("ffn.fc") && Catch::Contains("the model expects [128, 64]"));
  }
  SECTION("a matrix stored one column wide (which packing would pad many times over)") {
    const auto good = dir.file("good.pt");
    save_checkpoint(good, *model, meta_of(cfg));
    REQUIRE_NOTHROW(load_seq2seq(good, torch::kCPU));
    const auto stored = TensorArchive::load(good);
    TensorArchive edited;
    for (const auto& name : stored.string_names()) edited.write(name, *stored.read_string(name));
    for (const auto& name : stored.tensor_names()) {
      torch::Tensor t;
      stored.try_read(name, t);
      edited.write(name, name == "int8." + fc1 + ".values" ? t.reshape({-1, 1}).clone() : t.clone());
    }
    const auto path = dir.file("column.pt");
    edited.save(path);
    CHECK_THROWS_WITH(load_seq2seq(path, torch::kCPU),
                      Catch::Contains(path) && Catch::Contains("'" + fc1 + "' has shape [16384, 1]") &&
                          Catch::Contains("the model expects [256, 64]"));
  }
}

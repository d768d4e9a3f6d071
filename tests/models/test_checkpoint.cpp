// Model checkpoints: round trips and bad files.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "models/bert.h"
#include "models/checkpoint.h"
#include "models/factory.h"
#include "models/tiny_config.h"
#include "checkpoint_fixtures.h"
#include "support/cuda.h"
#include "support/temp_dir.h"
#include "support/tiny_checkpoint.h"

using namespace parla::models;
using parla::testing::TempDir;

using parla::testing::meta_for;
using parla::testing::outputs;

TEST_CASE("save then load gives a model with identical outputs and the same metadata") {
  TempDir dir("checkpoint");
  torch::manual_seed(1);
  for (auto cfg : {parla::testing::tiny_transformer(), parla::testing::tiny_rnn()}) {
    cfg.tie_output = cfg.type == parla::ModelType::kRnn;
    cfg.positions = parla::PositionEncoding::kLearned;
    auto model = build_seq2seq(cfg, 20, 24);
    auto path = dir.file(std::string(parla::config::name_of(cfg.type)) + ".pt");
    save_checkpoint(path, *model, meta_for(cfg));
    auto loaded = load_seq2seq(path);
    CHECK(loaded.model->vocab_size() == 24);
    CHECK(loaded.model->source_vocab_size() == 20);
    CHECK(outputs(*loaded.model).equal(outputs(*model)));
    CHECK(loaded.meta.src_spm == meta_for(cfg).src_spm);
    CHECK(loaded.meta.info["step"] == 42);
    CHECK(loaded.meta.config["model"]["type"] == cfg.type);
    CHECK(read_meta(path).tgt_vocab_size == 24);
  }
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    CHECK(e.path().string().find(".tmp") == std::string::npos);
}

TEST_CASE("load_seq2seq shows the metadata to its on_meta callback once, and what the callback throws leaves it") {
  TempDir dir("checkpoint-on-meta");
  torch::manual_seed(2);
  const auto cfg = parla::testing::tiny_transformer();
  auto model = build_seq2seq(cfg, 20, 24);
  const auto path = dir.file("model.pt");
  save_checkpoint(path, *model, meta_for(cfg));
  int calls = 0;
  auto loaded = load_seq2seq(path, torch::kCPU, [&](const ModelMeta& meta) {
    ++calls;
    CHECK(meta.src_spm == meta_for(cfg).src_spm);
    CHECK(meta.tgt_vocab_size == 24);
  });
  CHECK(calls == 1);
  CHECK(outputs(*loaded.model).equal(outputs(*model)));
  CHECK_THROWS_WITH(load_seq2seq(path, torch::kCPU, [](const ModelMeta&) { throw parla::DataError("refused"); }),
                    "refused");
}

TEST_CASE("vocabularies gives each side its own SentencePiece model, one model for both when they are the same") {
  TempDir dir("checkpoint-vocabularies");
  const auto joint = dir.file("joint.pt"), separate = dir.file("separate.pt");
  parla::testing::write_tiny_checkpoint(joint, 1);
  auto layers = parla::testing::tiny_transformer();
  layers.share_embeddings = false;
  parla::testing::write_tiny_checkpoint(separate, 1, layers, 40);
  const std::string line = parla::testing::toy_words()[0] + " " + parla::testing::toy_words()[5];
  for (const auto& path : {joint, separate}) {
    const auto meta = read_meta(path);
    auto [source, target] = vocabularies(meta, path);
    // Each side answers as source_vocab and target_vocab would.
    CHECK(source.size() == source_vocab(meta, path).size());
    CHECK(target.size() == target_vocab(meta, path).size());
    CHECK(source.encode(line) == source_vocab(meta, path).encode(line));
    CHECK(target.encode(line) == target_vocab(meta, path).encode(line));
  }
  CHECK(vocabularies(read_meta(separate), separate).second.size() == 40);
  CHECK(vocabularies(read_meta(separate), separate).first.size() == 48);
}

TEST_CASE("routing centroids and performer features moved by training are saved and loaded with the weights") {
  TempDir dir("checkpoint-variants");
  torch::manual_seed(3);
  auto cfg = parla::testing::tiny_transformer();
  cfg.encoder_attention = parla::AttentionKind::kRouting;
  cfg.decoder_attention = parla::AttentionKind::kPerformer;
  cfg.performer_redraw_every = 1;
  auto model = build_seq2seq(cfg, 20, 24);
  model->train();
  auto src = torch::tensor({5, 9, 7, 3, 6, 8, 3, 0}, torch::kLong).view({2, 4});
  auto tgt = torch::tensor({2, 5, 6, 2, 7, 8}, torch::kLong).view({2, 3});
  for (int i = 0; i < 3; ++i) model->forward(src, tgt);  // moves the centroids, redraws the features twice
  auto fresh = build_seq2seq(cfg, 20, 24);
  auto buffers = [](torch::nn::Module& m) {
    std::vector<torch::Tensor> out;
    for (auto& b : m.named_buffers(true))
      if (b.key().find("routing_") != std::string::npos || b.key().find("performer_") != std::string::npos)
        out.push_back(b.value());
    return out;
  };
  const auto trained = buffers(*model), initial = buffers(*fresh);
  REQUIRE(trained.size() == 2 * 3 + 2 * 2);  // 2 encoder layers x 3 routing buffers, 2 decoder layers x 2
  bool moved = false;
  for (size_t i = 0; i < trained.size(); ++i) {
    const bool changed = !trained[i].equal(initial[i]);
    if (trained[i].is_floating_point()) CHECK(changed);  // every centroid buffer and every feature draw
    moved = moved || changed;
  }
  CHECK(moved);
  auto path = dir.file("variants.pt");
  save_checkpoint(path, *model, meta_for(cfg));
  auto loaded = load_seq2seq(path);
  const auto restored = buffers(*loaded.model);
  REQUIRE(restored.size() == trained.size());
  for (size_t i = 0; i < trained.size(); ++i) CHECK(restored[i].equal(trained[i]));
  CHECK(outputs(*loaded.model).equal(outputs(*model)));
}

TEST_CASE("extra archives written with a checkpoint are read back by load_weights") {
  TempDir dir("checkpoint-extra");
  auto cfg = parla::testing::tiny_transformer();
  auto model = build_seq2seq(cfg, 20, 20);
  auto path = dir.file("model.pt");
  save_checkpoint(path, *model, meta_for(cfg), [](TensorArchive& a) {
    a.write("optimizer_step", torch::tensor({7}));
    a.write("note", std::string("kept"));
  });
  auto other = build_seq2seq(cfg, 20, 20);
  torch::Tensor step;
  std::string note;
  load_weights(path, *other, [&](const TensorArchive& a) {
    REQUIRE(a.try_read("optimizer_step", step));
    note = *a.read_string("note");
  });
  CHECK(note == "kept");
  CHECK(step.item<int64_t>() == 7);
  CHECK(outputs(*other).equal(outputs(*model)));
}

TEST_CASE("BERT checkpoints round trip through load_weights") {
  TempDir dir("checkpoint-bert");
  auto cfg = parla::testing::tiny_transformer();
  cfg.type = parla::ModelType::kBert;
  auto bert = build_bert(cfg, 30);
  auto path = dir.file("bert.pt");
  save_checkpoint(path, *bert, meta_for(cfg));
  CHECK(read_meta(path).src_vocab_size == 30);
  auto other = build_bert(cfg, 30);
  load_weights(path, *other);
  bert->eval();
  other->eval();
  auto tokens = torch::tensor({2, 7, 8, 3}, torch::kLong).view({1, 4});
  CHECK(other->forward(tokens).mlm_logits.equal(bert->forward(tokens).mlm_logits));
}

TEST_CASE("missing, corrupt, foreign and mismatched checkpoints are DataErrors naming the file") {
  TempDir dir("checkpoint-bad");
  auto expect_data_error = [](auto fn, const std::string& path) {
    try {
      fn();
      FAIL("expected a DataError");
    } catch (const parla::DataError& e) {
      CHECK(std::string(e.what()).find(path) != std::string::npos);
    }
  };
  auto missing = dir.file("missing.pt");
  expect_data_error([&] { load_seq2seq(missing); }, missing);
  auto corrupt = dir.write("corrupt.pt", "this is not a checkpoint");
  expect_data_error([&] { load_seq2seq(corrupt); }, corrupt);
  auto foreign = dir.file("foreign.pt");
  torch::save(torch::ones({3}), foreign);
  expect_data_error([&] { read_meta(foreign); }, foreign);

  auto cfg = parla::testing::tiny_transformer();
  auto model = build_seq2seq(cfg, 20, 20);
  auto good = dir.file("good.pt");
  save_checkpoint(good, *model, meta_for(cfg));
  cfg.d_model = 32;
  auto wider = build_seq2seq(cfg, 20, 20);
  expect_data_error([&] { load_weights(good, *wider); }, good);
  cfg = parla::testing::tiny_transformer();
  cfg.decoder_layers = 3;
  auto deeper = build_seq2seq(cfg, 20, 20);
  expect_data_error([&] { load_weights(good, *deeper); }, good);

  // A truncated file (e.g. a crash during a copy) is corrupt.
  std::ifstream in(good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  auto truncated = dir.write("truncated.pt", bytes.substr(0, bytes.size() / 2));
  expect_data_error([&] { load_seq2seq(truncated); }, truncated);
}

TEST_CASE("saving into a folder that does not exist is an IoError and leaves nothing behind") {
  auto cfg = parla::testing::tiny_transformer();
  auto model = build_seq2seq(cfg, 20, 20);
  CHECK_THROWS_AS(save_checkpoint("/nonexistent-parla-dir/x.pt", *model, meta_for(cfg)), parla::IoError);
}

TEST_CASE("the checkpoint in ../shared/models, written before tensors followed the device, still loads") {
  const std::string path = std::string(PARLA_SHARED_DIR) + "/models/multi30k-en-de-small/average.pt";
  auto loaded = load_seq2seq(path, torch::kCPU);
  // Reference: ../shared/models/README.md (3+3 layers, d_model 256, 7.58M parameters, SentencePiece inside).
  int64_t n = 0;
  for (const auto& p : loaded.model->parameters()) {
    n += p.numel();
    CHECK(p.device().is_cpu());
  }
  CHECK(n >= 7575000);
  CHECK(n < 7585000);
  CHECK(loaded.meta.config["model"]["d_model"] == 256);
  CHECK(!loaded.meta.src_spm.empty());
  auto out = outputs(*loaded.model);
  CHECK(torch::isfinite(out).all().item<bool>());
}

TEST_CASE("tensors read through load_weights land on the model's device") {
  TempDir dir("checkpoint-device");
  torch::manual_seed(4);
  auto model = build_seq2seq(parla::testing::tiny_transformer(), 20, 24);
  auto path = dir.file("m.pt");
  auto extra = torch::arange(6, torch::kFloat);
  save_checkpoint(path, *model, meta_for(parla::testing::tiny_transformer()),
                  [&](TensorArchive& a) { a.write("extra", extra); });
  auto target = build_seq2seq(parla::testing::tiny_transformer(), 20, 24);
  torch::Tensor read;
  load_weights(path, *target, [&](const TensorArchive& a) { REQUIRE(a.try_read("extra", read)); });
  CHECK(read.device() == target->parameters().front().device());
  CHECK(torch::equal(read, extra));
  CHECK(outputs(*target).equal(outputs(*model)));
}

TEST_CASE("a checkpoint saved from a GPU loads on the CPU and one saved from the CPU loads on a GPU, identically",
          "[cuda]") {
  PARLA_REQUIRE_CUDA();
  TempDir dir("checkpoint-cuda");
  torch::manual_seed(6);
  const torch::Device gpu(torch::kCUDA, 0);
  for (auto cfg : {parla::testing::tiny_transformer(), parla::testing::tiny_rnn()}) {
    INFO(parla::config::name_of(cfg.type));
    auto model = build_seq2seq(cfg, 20, 24);
    const std::string type = parla::config::name_of(cfg.type);
    auto cpu_path = dir.file(type + "-cpu.pt"), gpu_path = dir.file(type + "-gpu.pt");
    save_checkpoint(cpu_path, *model, meta_for(cfg));
    model->to(gpu);
    save_checkpoint(gpu_path, *model, meta_for(cfg),
                    [&](TensorArchive& a) { a.write("moment", torch::ones({3}, gpu)); });

    auto on_cpu = load_seq2seq(gpu_path, torch::kCPU);
    auto on_gpu = load_seq2seq(cpu_path, gpu);
    CHECK(on_cpu.meta.src_spm == meta_for(cfg).src_spm);  // the byte tensors come back through the host
    CHECK(on_gpu.meta.src_spm == meta_for(cfg).src_spm);
    auto reference = model->named_parameters();
    auto a = on_cpu.model->named_parameters(), b = on_gpu.model->named_parameters();
    REQUIRE(a.size() == reference.size());
    for (const auto& p : reference) {
      CHECK(a[p.key()].device().is_cpu());
      CHECK(b[p.key()].device() == gpu);
      CHECK(torch::equal(a[p.key()], p.value().cpu()));
      CHECK(torch::equal(b[p.key()].cpu(), p.value().cpu()));
    }
    // A CPU model reading a GPU-written archive gets the extra tensors on the CPU (the trainer's optimizer state).
    auto cpu_model = build_seq2seq(cfg, 20, 24);
    torch::Tensor moment;
    load_weights(gpu_path, *cpu_model, [&](const TensorArchive& ar) { REQUIRE(ar.try_read("moment", moment)); });
    CHECK(moment.device().is_cpu());
    CHECK(torch::equal(moment, torch::ones({3})));
  }
}

TEST_CASE("the checkpoint in ../shared/models gives the CPU's outputs on a GPU", "[cuda]") {
  PARLA_REQUIRE_CUDA();
  at::globalContext().setAllowTF32CuBLAS(false);
  const std::string path = std::string(PARLA_SHARED_DIR) + "/models/multi30k-en-de-small/average.pt";
  auto cpu = load_seq2seq(path, torch::kCPU);
  auto gpu = load_seq2seq(path, torch::Device(torch::kCUDA, 0));
  torch::NoGradGuard g;
  auto src = torch::tensor({5, 9, 7, 3, 6, 8, 3, 0}, torch::kLong).view({2, 4});
  auto tgt = torch::tensor({2, 5, 6, 2, 7, 8}, torch::kLong).view({2, 3});
  auto a = cpu.model->forward(src, tgt);
  auto b = gpu.model->forward(src.cuda(), tgt.cuda()).cpu();
  CHECK((a - b).abs().max().item<double>() < 1e-3);
}

TEST_CASE("a checkpoint truncated in place between mapping and reading its weights is refused, not a SIGBUS") {
  TempDir dir("checkpoint-truncated-while-read");
  torch::manual_seed(3);
  auto cfg = parla::testing::tiny_transformer();
  cfg.d_model = 64;
  cfg.ffn_dim = 256;
  auto model = build_seq2seq(cfg, 500, 500);
  const auto path = dir.file("model.pt");
  save_checkpoint(path, *model, meta_for(cfg));
  const auto size = std::filesystem::file_size(path);
  for (bool int8 : {false, true}) {
    INFO("quantized while loading " << int8);
    const auto copy = dir.file(int8 ? "int8.pt" : "float.pt");
    std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing);
    // on_meta runs once the file is mapped and its header read, before any weight is: the file is cut there, as
    // another process replacing it in place would (deterministically, rather than by racing one).
    CHECK_THROWS_WITH(load_seq2seq(copy, torch::kCPU,
                                   [&](const ModelMeta&) {
                                     std::filesystem::resize_file(copy, size / 4);
                                   },
                                   int8),
                      Catch::Contains(copy + ": changed while it was read"));
  }
  // the untouched file loads, and the same model as before
  CHECK(outputs(*load_seq2seq(path).model).equal(outputs(*model)));
}

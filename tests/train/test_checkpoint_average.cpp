// Checkpoint averaging (train/checkpoint_average.h) against the element-wise mean computed here from the
// models that were saved, on tiny Transformers.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <torch/serialize/input-archive.h>

#include "core/config.h"
#include "core/error.h"
#include "models/checkpoint.h"
#include "models/factory.h"
#include "support/cuda.h"
#include "support/temp_dir.h"
#include "train/checkpoint_average.h"

namespace {

parla::Config tiny_config(int d_model = 16, int heads = 2) {
  parla::Config c;
  c.model.d_model = d_model;
  c.model.ffn_dim = 32;
  c.model.heads = heads;
  c.model.encoder_layers = 1;
  c.model.decoder_layers = 1;
  return c;
}

// Builds a tiny model from `seed`, saves it as a checkpoint of `step` (with a trainer archive that averaging
// must drop) and returns the model.
std::shared_ptr<parla::models::Seq2SeqModel> save_tiny(const std::string& path, uint64_t seed, int64_t step,
                                                        const parla::Config& c = tiny_config()) {
  torch::manual_seed(seed);
  auto model = parla::models::build_seq2seq(c.model, 20, 24);
  parla::models::ModelMeta meta;
  meta.config = parla::config::to_json(c);
  meta.src_spm = "src-spm-" + std::to_string(seed);
  meta.tgt_spm = "tgt-spm-" + std::to_string(seed);
  meta.info = {{"step", step}};
  parla::models::save_checkpoint(path, *model, meta, [](parla::models::TensorArchive& a) {
    a.write("optimizer_marker", torch::ones({3}));
  });
  return model;
}

}  // namespace

TEST_CASE("averaging checkpoints gives the element-wise mean of their weights and the newest metadata",
          "[checkpoint_average]") {
  parla::testing::TempDir tmp("ckpt-avg");
  std::vector<std::string> paths = {tmp.file("a.pt"), tmp.file("b.pt"), tmp.file("c.pt")};
  // Steps out of order: the newest (step 300) is the middle file.
  auto a = save_tiny(paths[0], 1, 100);
  auto b = save_tiny(paths[1], 2, 300);
  auto c = save_tiny(paths[2], 3, 200);
  const auto out = tmp.file("avg.pt");
  parla::train::average_checkpoints(paths, out);

  auto loaded = parla::models::load_seq2seq(out);
  auto pa = a->named_parameters(), pb = b->named_parameters(), pc = c->named_parameters();
  auto got = loaded.model->named_parameters();
  REQUIRE(got.size() == pa.size());
  bool any_differs = false;
  for (const auto& item : got) {
    INFO(item.key());
    auto expected = torch::stack({pa[item.key()].to(torch::kFloat64), pb[item.key()].to(torch::kFloat64),
                                  pc[item.key()].to(torch::kFloat64)})
                        .mean(0);
    CHECK(torch::allclose(item.value().to(torch::kFloat64), expected, /*rtol=*/0, /*atol=*/1e-7));
    any_differs = any_differs || !torch::equal(pa[item.key()], pb[item.key()]);
  }
  CHECK(any_differs);  // the inputs really differ, so the mean is not trivially one of them

  CHECK(loaded.meta.info["step"] == 300);
  CHECK(loaded.meta.src_spm == "src-spm-2");
  CHECK(loaded.meta.tgt_spm == "tgt-spm-2");
  CHECK(loaded.meta.info["averaged_from"] == nlohmann::json(paths));
  CHECK(loaded.meta.info["averaged_steps"] == nlohmann::json({100, 300, 200}));

  // The trainer's archives (optimizer state) are not carried over.
  CHECK_FALSE(parla::models::TensorArchive::load(out).contains("optimizer_marker"));
  CHECK(std::filesystem::exists(paths[1]));
}

TEST_CASE("averaging one checkpoint reproduces its weights", "[checkpoint_average]") {
  parla::testing::TempDir tmp("ckpt-avg-one");
  auto a = save_tiny(tmp.file("a.pt"), 7, 10);
  parla::train::average_checkpoints({tmp.file("a.pt")}, tmp.file("out.pt"));
  auto loaded = parla::models::load_seq2seq(tmp.file("out.pt"));
  auto pa = a->named_parameters();
  for (const auto& item : loaded.model->named_parameters()) CHECK(torch::equal(item.value(), pa[item.key()]));
}

TEST_CASE("averaging checkpoints of different architectures is a data error naming the file",
          "[checkpoint_average]") {
  parla::testing::TempDir tmp("ckpt-avg-mismatch");
  save_tiny(tmp.file("a.pt"), 1, 100);
  save_tiny(tmp.file("wide.pt"), 2, 200, tiny_config(/*d_model=*/32));
  save_tiny(tmp.file("heads.pt"), 3, 300, tiny_config(16, /*heads=*/4));  // same shapes, different function
  const auto out = tmp.file("avg.pt");

  REQUIRE_THROWS_AS(parla::train::average_checkpoints({tmp.file("a.pt"), tmp.file("wide.pt")}, out),
                    parla::DataError);
  REQUIRE_THROWS_WITH(parla::train::average_checkpoints({tmp.file("a.pt"), tmp.file("wide.pt")}, out),
                      Catch::Contains("wide.pt") && Catch::Contains("d_model"));
  REQUIRE_THROWS_WITH(parla::train::average_checkpoints({tmp.file("a.pt"), tmp.file("heads.pt")}, out),
                      Catch::Contains("heads.pt") && Catch::Contains("heads"));
  REQUIRE_THROWS_WITH(parla::train::average_checkpoints({tmp.file("a.pt"), tmp.file("missing.pt")}, out),
                      Catch::Contains("missing.pt"));
  std::ofstream(tmp.file("junk.pt")) << "not a checkpoint";
  REQUIRE_THROWS_AS(parla::train::average_checkpoints({tmp.file("a.pt"), tmp.file("junk.pt")}, out),
                    parla::DataError);
  REQUIRE_THROWS_AS(parla::train::average_checkpoints({}, out), parla::UsageError);
  CHECK_FALSE(std::filesystem::exists(out));  // nothing half-written
}

TEST_CASE("the last N numbered checkpoints are chosen by step, oldest first", "[checkpoint_average]") {
  parla::testing::TempDir tmp("ckpt-last");
  for (const char* name : {"checkpoint_20.pt", "checkpoint_100.pt", "checkpoint_3000.pt", "checkpoint_last.pt",
                           "checkpoint_best.pt", "checkpoint_9.pt.tmp.12"})
    std::ofstream(tmp.file(name)) << "x";
  auto last = parla::train::last_checkpoints(tmp.file(""), 2);
  REQUIRE(last.size() == 2);
  CHECK(std::filesystem::path(last[0]).filename() == "checkpoint_100.pt");
  CHECK(std::filesystem::path(last[1]).filename() == "checkpoint_3000.pt");
  CHECK(parla::train::last_checkpoints(tmp.file(""), 3).size() == 3);
  REQUIRE_THROWS_AS(parla::train::last_checkpoints(tmp.file(""), 4), parla::DataError);
  REQUIRE_THROWS_AS(parla::train::last_checkpoints(tmp.file("nowhere"), 1), parla::DataError);
}

TEST_CASE("checkpoints written from a GPU average on the CPU to the mean of their weights",
          "[checkpoint_average][cuda]") {
  PARLA_REQUIRE_CUDA();
  parla::testing::TempDir tmp("ckpt-avg-cuda");
  std::vector<std::string> paths = {tmp.file("a.pt"), tmp.file("b.pt")};
  std::vector<std::shared_ptr<parla::models::Seq2SeqModel>> models;
  for (size_t i = 0; i < paths.size(); ++i) {
    torch::manual_seed(10 + i);
    auto model = parla::models::build_seq2seq(tiny_config().model, 20, 24);
    model->to(torch::Device(torch::kCUDA, 0));
    parla::models::ModelMeta meta;
    meta.config = parla::config::to_json(tiny_config());
    meta.info = {{"step", static_cast<int64_t>(i + 1)}};
    parla::models::save_checkpoint(paths[i], *model, meta, [](parla::models::TensorArchive& a) {
      a.write("optimizer_marker", torch::ones({3}, torch::Device(torch::kCUDA, 0)));
    });
    models.push_back(model);
  }
  const auto out = tmp.file("avg.pt");
  parla::train::average_checkpoints(paths, out);
  auto loaded = parla::models::load_seq2seq(out, torch::kCPU);
  auto pa = models[0]->named_parameters(), pb = models[1]->named_parameters();
  for (const auto& p : loaded.model->named_parameters()) {
    INFO(p.key());
    CHECK(p.value().device().is_cpu());
    auto mean = ((pa[p.key()].cpu().to(torch::kDouble) + pb[p.key()].cpu().to(torch::kDouble)) / 2).to(torch::kFloat);
    CHECK(torch::allclose(p.value(), mean, 0, 1e-7));
  }
}

TEST_CASE("averaging keeps the newest checkpoint's performer features, a draw rather than a weight",
          "[checkpoint_average]") {
  parla::testing::TempDir tmp("ckpt-avg-performer");
  std::vector<std::string> paths = {tmp.file("a.pt"), tmp.file("b.pt"), tmp.file("c.pt")};
  std::vector<std::shared_ptr<parla::models::Seq2SeqModel>> models;
  auto c = tiny_config();
  c.model.decoder_attention = parla::AttentionKind::kPerformer;
  c.model.performer_redraw_every = 1;
  auto src = torch::tensor({5, 9, 7, 3}, torch::kLong).view({1, 4});
  auto tgt = torch::tensor({2, 5, 6}, torch::kLong).view({1, 3});
  for (int i = 0; i < 3; ++i) {
    torch::manual_seed(10 + i);
    auto model = parla::models::build_seq2seq(c.model, 20, 24);
    model->train();
    for (int pass = 0; pass <= i + 1; ++pass) model->forward(src, tgt);  // 1, 2, 3 redraws: three draws
    parla::models::ModelMeta meta;
    meta.config = parla::config::to_json(c);
    meta.info = {{"step", std::vector<int>{100, 300, 200}[i]}};  // the newest is the middle file
    parla::models::save_checkpoint(paths[i], *model, meta);
    models.push_back(model);
  }
  const auto out = tmp.file("avg.pt");
  parla::train::average_checkpoints(paths, out);
  auto avg = parla::models::load_seq2seq(out).model;
  auto named = [](parla::models::Seq2SeqModel& m) {
    std::map<std::string, torch::Tensor> t;
    for (auto& p : m.named_parameters(true)) t[p.key()] = p.value();
    for (auto& b : m.named_buffers(true)) t[b.key()] = b.value();
    return t;
  };
  auto got = named(*avg), a = named(*models[0]), b = named(*models[1]), c3 = named(*models[2]);
  int draws = 0;
  for (auto& [name, t] : got) {
    INFO(name);
    if (name.find("performer_features") != std::string::npos) {
      ++draws;
      REQUIRE(!a[name].equal(b[name]));
      REQUIRE(t.equal(b[name]));  // the newest (step 300), not the mean
    } else if (t.is_floating_point()) {
      REQUIRE(torch::allclose(t, (a[name] + b[name] + c3[name]) / 3.0, 1e-5, 1e-6));
    }
  }
  REQUIRE(draws == 1);
}

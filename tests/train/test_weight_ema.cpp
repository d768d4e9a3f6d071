// The moving average of the weights (train/weight_ema.h, training.ema_decay): the recurrence against a hand
// computation, swapping, checkpoints, and a training run whose saved average is recomputed from its own
// numbered checkpoints.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>

#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "models/checkpoint.h"
#include "models/factory.h"
#include "support/archives.h"
#include "support/tensors.h"
#include "toy_dataset.h"
#include "train/trainer.h"
#include "train/weight_ema.h"

namespace weight_ema_tests {

using parla::testing::max_abs_diff;
using parla::train::WeightEma;
namespace fs = std::filesystem;

TEST_CASE("weight EMA follows avg <- d_t avg + (1 - d_t) w with d_t = min(decay, (1 + t) / (10 + t))") {
  torch::manual_seed(2);
  torch::nn::Linear lin(3, 2);
  const double decay = 0.9;
  WeightEma ema(*lin, decay);
  // Reference in double, from the definition.
  auto ref_w = lin->weight.detach().to(torch::kDouble).clone();
  auto ref_b = lin->bias.detach().to(torch::kDouble).clone();
  for (int64_t t = 1; t <= 40; ++t) {
    {
      torch::NoGradGuard g;
      lin->weight.add_(torch::randn({2, 3}));
      lin->bias.mul_(0.5).add_(1.0);
    }
    const double d = std::min(decay, (1.0 + t) / (10.0 + t));
    CHECK(ema.decay_at(t) == Approx(d));
    ref_w = d * ref_w + (1 - d) * lin->weight.detach().to(torch::kDouble);
    ref_b = d * ref_b + (1 - d) * lin->bias.detach().to(torch::kDouble);
    ema.update(t);
  }
  CHECK(ema.decay_at(1) == Approx(2.0 / 11.0));  // early updates are averaged with little weight on the start
  CHECK(ema.decay_at(1000) == Approx(0.9));
  CHECK(max_abs_diff(ema.average("weight").to(torch::kDouble), ref_w) < 1e-5);
  CHECK(max_abs_diff(ema.average("bias").to(torch::kDouble), ref_b) < 1e-5);
}

TEST_CASE("training.ema_decay below 0 or at 1 is refused naming the key, and 0.999 is taken") {
  parla::config::ConfigBuilder b;
  CHECK_THROWS_WITH(b.set("training.ema_decay", 1.0, "test"), Catch::Contains("training.ema_decay"));
  CHECK_THROWS_WITH(b.set("training.ema_decay", -0.5, "test"), Catch::Contains("training.ema_decay"));
  b.set("training.ema_decay", 0.999, "test");
  CHECK(b.build().training.ema_decay == Approx(0.999));
}

TEST_CASE("weight EMA: swap exchanges model and average exactly, and twice restores both") {
  torch::manual_seed(4);
  torch::nn::Linear lin(4, 4);
  WeightEma ema(*lin, 0.5);
  {
    torch::NoGradGuard g;
    lin->weight.add_(1.0);
  }
  ema.update(100);
  auto raw = lin->weight.detach().clone();
  auto avg = ema.average("weight").clone();
  REQUIRE_FALSE(raw.equal(avg));
  ema.swap();
  CHECK(lin->weight.detach().equal(avg));
  CHECK(ema.average("weight").equal(raw));
  parla::train::with_averaged_weights(&ema, [&] { CHECK(lin->weight.detach().equal(raw)); });
  ema.swap();
  CHECK(lin->weight.detach().equal(raw));
  CHECK(ema.average("weight").equal(avg));
  // The weights come back even when the work in between throws.
  CHECK_THROWS(parla::train::with_averaged_weights(&ema, [&]() -> int { throw std::runtime_error("x"); }));
  CHECK(lin->weight.detach().equal(raw));
}

TEST_CASE("weight EMA: saved and loaded by name, a missing section is reported, a wrong shape names the file") {
  torch::manual_seed(5);
  torch::nn::Linear lin(3, 3);
  WeightEma ema(*lin, 0.7);
  {
    torch::NoGradGuard g;
    lin->weight.mul_(3);
  }
  ema.update(50);
  parla::models::TensorArchive out;
  ema.save(out);
  auto in = parla::testing::reread(out);
  WeightEma back(*lin, 0.7);
  REQUIRE(back.load(in, "x.pt"));
  CHECK(back.average("weight").equal(ema.average("weight")));
  parla::models::TensorArchive empty_out;
  empty_out.write("other", torch::zeros({1}));
  auto empty_in = parla::testing::reread(empty_out);
  CHECK_FALSE(back.load(empty_in, "x.pt"));
  torch::nn::Linear other(3, 5);
  WeightEma wrong(*other, 0.7);
  auto again = parla::testing::reread(out);
  CHECK_THROWS_WITH(wrong.load(again, "x.pt"), Catch::Contains("x.pt"));
}

// The model of `path` (raw weights) and, when the checkpoint holds one, its weight average.
struct Loaded {
  std::shared_ptr<parla::models::Seq2SeqModel> model;
  std::map<std::string, torch::Tensor> average;
};

Loaded load(const parla::Config& cfg, const std::string& path) {
  Loaded l;
  l.model = parla::models::build_seq2seq(cfg.model, 24, 24);
  parla::models::load_weights(path, *l.model, [&](const parla::models::TensorArchive& a) {
    if (a.tensor_names("weight_ema.").empty()) return;
    for (const auto& p : l.model->named_parameters()) {
      torch::Tensor t;
      REQUIRE(a.try_read("weight_ema." + p.key(), t));
      l.average[p.key()] = t.clone();  // out of the file's mapping, which ends with the archive
    }
  });
  return l;
}

TEST_CASE("training with ema_decay: the saved average is the recurrence over the run's own updates, best is the "
          "average, and the raw training is unchanged") {
  auto data = parla::test::toy_dataset("ema");
  auto plain = parla::test::toy_config(data, "ema-plain");
  auto with = parla::test::toy_config(data, "ema-on");
  for (auto* c : {&plain, &with}) {
    c->training.max_steps = 8;
    c->training.save_every = 1;
    c->training.keep_last = 10;
    c->training.valid_every = 8;
  }
  with.training.ema_decay = 0.6;
  auto rp = parla::train::Trainer(plain, {}).run();
  auto rw = parla::train::Trainer(with, {}).run();
  CHECK(rw.losses == rp.losses);  // the average never feeds back into training
  // Validation ran on the average, so it scores differently from the raw weights.
  CHECK(rw.last_validation["loss"].get<double>() != rp.last_validation["loss"].get<double>());
  const std::string dir = with.training.save_dir;
  for (const char* f : {"checkpoint_ema.pt", "checkpoint_best.pt", "checkpoint_8.pt"})
    REQUIRE(fs::exists(dir + "/" + f));
  CHECK_FALSE(fs::exists(plain.training.save_dir + "/checkpoint_ema.pt"));

  // From the average stored at step 3 and the raw weights of steps 4..8, by hand.
  auto start = load(with, dir + "/checkpoint_3.pt");
  REQUIRE_FALSE(start.average.empty());
  std::map<std::string, torch::Tensor> avg;
  for (auto& [k, v] : start.average) avg[k] = v.to(torch::kDouble);
  for (int t = 4; t <= 8; ++t) {
    auto raw = load(with, dir + "/checkpoint_" + std::to_string(t) + ".pt");
    const double d = std::min(0.6, (1.0 + t) / (10.0 + t));
    for (const auto& p : raw.model->named_parameters())
      avg[p.key()] = d * avg[p.key()] + (1 - d) * p.value().detach().to(torch::kDouble);
  }
  auto ema_model = load(with, dir + "/checkpoint_ema.pt");
  auto best_model = load(with, dir + "/checkpoint_best.pt");
  CHECK(ema_model.average.empty());  // a model to translate with: the average is its weights
  double worst = 0, best_vs_ema = 0;
  for (const auto& p : ema_model.model->named_parameters()) {
    worst = std::max(worst, max_abs_diff(p.value().detach().to(torch::kDouble), avg[p.key()]));
    best_vs_ema = std::max(best_vs_ema, max_abs_diff(p.value().detach(),
                                                     best_model.model->named_parameters()[p.key()].detach()));
  }
  CHECK(worst < 1e-5);
  CHECK(best_vs_ema == 0.0);  // the only validation was the best: checkpoint_best.pt is the average
  CHECK(parla::models::read_meta(dir + "/checkpoint_ema.pt").info["weights"] == "ema");
}

TEST_CASE("training with ema_decay: a run interrupted and resumed keeps the same average") {
  auto data = parla::test::toy_dataset("ema-resume");
  auto full = parla::test::toy_config(data, "ema-full");
  auto part = parla::test::toy_config(data, "ema-part");
  for (auto* c : {&full, &part}) {
    c->training.ema_decay = 0.8;
    c->training.valid_every = 0;
  }
  full.training.max_steps = 12;
  parla::train::Trainer(full, {}).run();
  part.training.max_steps = 5;
  parla::train::Trainer(part, {}).run();
  part.training.max_steps = 12;
  parla::train::TrainerOptions o;
  o.resume = part.training.save_dir + "/checkpoint_last.pt";
  parla::train::Trainer(part, o).run();
  auto a = load(full, full.training.save_dir + "/checkpoint_ema.pt");
  auto b = load(part, part.training.save_dir + "/checkpoint_ema.pt");
  double worst = 0;
  for (const auto& p : a.model->named_parameters())
    worst = std::max(worst, max_abs_diff(p.value().detach(), b.model->named_parameters()[p.key()].detach()));
  CHECK(worst == 0.0);
}

}  // namespace weight_ema_tests

// training.precision: bf16 autocast on the CPU (runs everywhere), fp16 refused on a CPU, and fp16 with dynamic
// loss scaling on a GPU ([cuda], skipped without one).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <torch/torch.h>

#include "support/choice.h"
#include "core/error.h"
#include "models/factory.h"
#include "models/tensor_archive.h"
#include "metrics_records.h"
#include "support/cuda.h"
#include "support/run.h"
#include "toy_dataset.h"
#include "train/trainer.h"

using parla::Config;
using parla::test::train_records;
using parla::train::Trainer;
using parla::train::TrainerOptions;
namespace fs = std::filesystem;

namespace {

// Every parameter stored in a checkpoint, as stored (its dtype too, which a copy into a model would hide).
std::vector<torch::Tensor> stored_parameters(const Config& cfg, int64_t vocab, const std::string& path) {
  auto model = parla::models::build_seq2seq(cfg.model, vocab, vocab);
  const auto archive = parla::models::TensorArchive::load(path);
  std::vector<torch::Tensor> out;
  for (const auto& p : model->named_parameters()) {
    torch::Tensor t;
    REQUIRE(archive.try_read("model." + p.key(), t));
    out.push_back(t.clone());
  }
  return out;
}

// Relative tolerance of a bf16 loss against fp32's over the first updates of the same seed: 2^-8, twice bf16's
// unit roundoff. The loss is a mean over ~200 tokens of fp32 log-softmaxes of logits that went through a few
// bf16 roundings each; those errors mostly average out (measured: 5e-4 at the first update, up to 1.7e-3 by the
// fifth, as the weights drift apart: Adam's first steps are about lr * sign(g), and rounding flips the sign of
// tiny gradients).
constexpr double kBf16Relative = 1.0 / 256;

bool has_cuda() { return parla::testing::cuda_or_skip(); }

}  // namespace

TEST_CASE(
    "bf16 autocast training on the CPU starts within bf16 rounding of fp32, lowers the loss, keeps fp32 "
    "weights",
    "[precision]") {
  auto data = parla::test::toy_dataset("bf16", 12);
  Config fp32 = parla::test::toy_config(data, "bf16-ref");
  Config bf16 = parla::test::toy_config(data, "bf16-run");
  fp32.training.max_steps = 5;
  bf16.training.max_steps = 300;
  bf16.training.valid_every = 150;
  bf16.training.precision = parla::Precision::kBf16;
  auto ref = Trainer(fp32, {}).run();
  auto run = Trainer(bf16, {}).run();
  REQUIRE(ref.losses.size() == 5);
  REQUIRE(run.losses.size() == 300);
  // The same seed gives the same initial weights and batches; only the arithmetic of the forward pass differs.
  CHECK(run.losses[0] != ref.losses[0]);  // not bit-identical: autocast did compute in bf16
  for (size_t i = 0; i < 5; ++i) {
    INFO("update " << i << ": fp32 " << ref.losses[i] << ", bf16 " << run.losses[i]);
    CHECK(run.losses[i] == Approx(ref.losses[i]).epsilon(kBf16Relative));
  }
  CHECK(run.skipped_steps == 0);
  CHECK(run.overflow_steps == 0);  // no loss scaling in bf16 (fp32's exponent range)
  CHECK(run.loss_scale == 0);
  // Learning, by the bounds the fp32 run of "training on a toy copy task ..." meets in as many steps: guessing
  // costs log(8) nats per token (8 ordinary ids); the validation loss, also under bf16 autocast, is far below.
  CHECK(run.losses.back() < run.losses.front() - 1.0);
  REQUIRE(run.last_validation.contains("nll"));
  CHECK(run.last_validation["nll"].get<double>() < 0.6 * std::log(8.0));
  // Master weights: autocast casts per use and never touches the parameters, so checkpoints hold fp32.
  for (const auto& p : stored_parameters(bf16, 12, bf16.training.save_dir + "/checkpoint_last.pt"))
    CHECK(p.scalar_type() == torch::kFloat);
  // No loss-scaler state outside fp16, and no fp16 fields in the metrics.
  for (const auto& r : train_records(bf16.training.save_dir)) CHECK_FALSE(r.contains("loss_scale"));
}

TEST_CASE("fp16 training on a CPU is refused before training, naming training.precision", "[precision]") {
  auto data = parla::test::toy_dataset("fp16-cpu", 12);
  Config cfg = parla::test::toy_config(data, "fp16-cpu-lib");
  cfg.training.max_steps = 2;
  cfg.training.precision = parla::Precision::kFp16;
  CHECK_THROWS_AS(Trainer(cfg, {}), parla::ConfigError);
  CHECK_THROWS_WITH(Trainer(cfg, {}), Catch::Contains("training.precision") && Catch::Contains("bf16"));
}

TEST_CASE("parla-train with fp16 on a CPU (--set or --precision) exits with 2 and names the key", "[precision]") {
  auto data = parla::test::toy_dataset("fp16-cpu-app", 12);
  Config cfg = parla::test::toy_config(data, "fp16-cpu-app-run");
  std::string config_path = std::string(PARLA_TEST_TMP_DIR) + "/train/fp16-cpu-app.json";
  std::ofstream(config_path) << parla::config::to_json(cfg).dump(2);
  for (std::vector<std::string> how : {std::vector<std::string>{"--set", "training.precision=fp16"},
                                       std::vector<std::string>{"--precision", "fp16"}}) {
    std::vector<std::string> args{"--config", config_path, "--device", "cpu", "--max-steps", "2"};
    args.insert(args.end(), how.begin(), how.end());
    auto r = parla::testing::run("parla-train", args);
    INFO(how[0] << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("training.precision") && Catch::Contains("fp16"));
    CHECK_FALSE(fs::exists(cfg.training.save_dir + "/checkpoint_last.pt"));
  }
}

TEST_CASE("fp16 training on a GPU scales the loss dynamically, lowers the loss and resumes with its scale",
          "[precision][cuda]") {
  if (!has_cuda()) return;
  auto data = parla::test::toy_dataset("fp16-gpu", 12);
  auto gpu_config = [&](const std::string& save, const std::string& precision) {
    Config c = parla::test::toy_config(data, save);
    c.runtime.device = "cuda";
    c.model.dropout = 0;  // the checkpoint keeps the CPU generator only; no GPU dropout, so resuming is exact
    c.training.precision = parla::testing::choice<parla::Precision>(precision);
    c.training.max_steps = 120;
    c.training.valid_every = 60;
    // A low start and a short window: the scale doubles 4 times in 120 updates (to 4096, below where this model's
    // gradients, O(1) per weight, would overflow fp16), so the first update is never skipped and a resumed run
    // must restore the scale and its window count to follow the same doublings.
    c.training.loss_scale_init = 256;
    c.training.loss_scale_window = 30;
    return c;
  };
  Config fp32 = gpu_config("fp16-gpu-ref", "fp32");
  fp32.training.max_steps = 5;
  auto ref = Trainer(fp32, {}).run();
  Config full = gpu_config("fp16-gpu-full", "fp16");
  auto rf = Trainer(full, {}).run();
  REQUIRE(rf.steps == 120);
  CHECK(rf.skipped_steps == 0);
  std::vector<double> taken;  // losses of the updates taken (overflowing ones are NaN in rf.losses)
  for (double l : rf.losses)
    if (std::isfinite(l)) taken.push_back(l);
  REQUIRE(taken.size() == 120);
  CHECK(rf.losses.size() == static_cast<size_t>(120 + rf.overflow_steps));
  // The first update is computed from the same weights and batch as fp32's; fp16 keeps 11 significant bits
  // (relative rounding 2^-12), finer than bf16, so the bf16 test's bound holds with room.
  REQUIRE(std::isfinite(rf.losses[0]));
  CHECK(rf.losses[0] == Approx(ref.losses[0]).epsilon(kBf16Relative));
  CHECK(rf.losses[0] != ref.losses[0]);  // autocast did compute in fp16
  // The scale stays a power of two (halvings and doublings of 2^8) and is what the metrics report; without
  // overflows it doubled once per window: 256 * 2^(120/30).
  REQUIRE(rf.loss_scale > 0);
  CHECK(std::log2(rf.loss_scale) == std::round(std::log2(rf.loss_scale)));
  if (rf.overflow_steps == 0) CHECK(rf.loss_scale == 4096);
  auto recs = train_records(full.training.save_dir);
  REQUIRE(recs.size() == 120);
  CHECK(recs.back()["loss_scale"].get<double>() == rf.loss_scale);
  CHECK(recs.back()["overflow_steps"].get<int64_t>() == rf.overflow_steps);
  double first = 0, last = 0;
  for (size_t i = 0; i < 10; ++i) {
    first += taken[i] / 10;
    last += taken[taken.size() - 10 + i] / 10;
  }
  CHECK(last < first - 1.0);

  // Interrupted at step 50 (scale 2^9, 20 of 30 updates towards the next doubling) and resumed: the scale and its
  // window count come back from the checkpoint, so the scale follows the uninterrupted run's. (Losses within 1e-4:
  // cuBLAS may pick other kernels in a new process.)
  Config part = gpu_config("fp16-gpu-part", "fp16");
  part.training.max_steps = 50;
  Trainer(part, {}).run();
  part.training.max_steps = 120;
  TrainerOptions o;
  o.resume = part.training.save_dir + "/checkpoint_last.pt";
  auto rp = Trainer(part, o).run();
  CHECK(rp.loss_scale == rf.loss_scale);
  CHECK(rp.overflow_steps == rf.overflow_steps);
  auto lp = train_records(part.training.save_dir);
  REQUIRE(lp.size() == recs.size());
  for (size_t i = 0; i < recs.size(); ++i) {
    INFO("step " << recs[i]["step"]);
    CHECK(lp[i]["loss"].get<double>() == Approx(recs[i]["loss"].get<double>()).epsilon(1e-4));
    CHECK(lp[i]["loss_scale"] == recs[i]["loss_scale"]);
  }
}

TEST_CASE("fp16 overflows skip updates without counting as bad steps, and an underflowing scale stops training",
          "[precision][cuda]") {
  if (!has_cuda()) return;
  auto data = parla::test::toy_dataset("fp16-overflow", 12);
  // A scale of 2^40 overflows fp16 (max 65504) in the backward pass: the scaler halves it until gradients fit.
  // That takes more consecutive overflows than max_bad_steps, which must not stop the run.
  Config cfg = parla::test::toy_config(data, "fp16-overflow-run");
  cfg.runtime.device = "cuda";
  cfg.training.precision = parla::Precision::kFp16;
  cfg.training.max_steps = 10;
  cfg.training.max_bad_steps = 2;
  cfg.training.loss_scale_init = std::ldexp(1.0, 40);
  auto r = Trainer(cfg, {}).run();
  CHECK(r.steps == 10);
  CHECK(r.skipped_steps == 0);
  CHECK(r.overflow_steps >= 10);  // from 2^40 down to at most 2^30 (the gradients here are O(1))
  CHECK(r.loss_scale <= std::ldexp(1.0, 30));
  CHECK(r.losses.size() == static_cast<size_t>(r.steps + r.overflow_steps));
  CHECK(std::isnan(r.losses[0]));  // the first update overflows at 2^40 and is skipped

  // The same overflows with a minimum the scale cannot get under: a DataError naming the key and the way out.
  Config stop = parla::test::toy_config(data, "fp16-underflow");
  stop.runtime.device = "cuda";
  stop.training.precision = parla::Precision::kFp16;
  stop.training.max_steps = 10;
  stop.training.loss_scale_init = std::ldexp(1.0, 40);
  stop.training.min_loss_scale = std::ldexp(1.0, 36);
  CHECK_THROWS_WITH(Trainer(stop, {}).run(), Catch::Contains("loss scale underflowed") &&
                                                 Catch::Contains("training.precision") && Catch::Contains("bf16"));
}

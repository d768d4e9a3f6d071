// The learner (train/learner.h): what it owns round-trips through a checkpoint's archive, so that a resumed run
// takes the same next update as the run that saved it.
#include <catch2/catch.hpp>

#include <memory>

#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "support/archives.h"
#include "train/learner.h"

namespace learner_tests {

using parla::train::Learner;

parla::TrainingConfig learner_config() {
  parla::TrainingConfig t;
  t.lr = 0.05;
  t.weight_decay = 0.01;
  t.ema_decay = 0.9;
  return t;
}

// One AdamW update on a fixed batch, then the average's; returns the loss.
void update(Learner& learner, torch::nn::LinearImpl& lin, int64_t step) {
  torch::manual_seed(100 + step);
  auto x = torch::randn({5, 4});
  auto loss = lin.forward(x).pow(2).sum();
  learner.optimizer().zero_grad();
  loss.backward();
  learner.optimizer().step();
  if (learner.ema()) learner.ema()->update(step);
}

std::shared_ptr<torch::nn::LinearImpl> copy_of(const torch::nn::LinearImpl& lin) {
  auto out = std::make_shared<torch::nn::LinearImpl>(4, 3);
  torch::NoGradGuard no_grad;
  out->weight.copy_(lin.weight);
  out->bias.copy_(lin.bias);
  return out;
}

TEST_CASE("a learner loaded from what another saved takes the same next updates: AdamW state, average and loss "
          "scale travel") {
  torch::manual_seed(1);
  auto lin = std::make_shared<torch::nn::LinearImpl>(4, 3);
  Learner saved(lin, learner_config(), torch::kCPU, torch::kHalf);
  saved.start_average();
  REQUIRE(saved.loss_scaling());
  for (int64_t step = 1; step <= 4; ++step) update(saved, *lin, step);
  saved.scaler().update(false);  // an overflow halves the scale: a fresh scaler would differ
  parla::models::TensorArchive out;
  saved.save(out);
  CHECK(out.contains("loss_scaler"));
  const auto archive = parla::testing::reread(out);

  auto twin = copy_of(*lin);  // the weights come back through the model's own loading
  Learner loaded(twin, learner_config(), torch::kCPU, torch::kHalf);
  loaded.load(archive, "saved.pt");
  REQUIRE(loaded.ema());
  CHECK(loaded.scaler().scale() == saved.scaler().scale());
  CHECK(loaded.scaler().overflows() == 1);
  CHECK(torch::equal(loaded.ema()->average("weight"), saved.ema()->average("weight")));

  // Without the moments a fresh AdamW's next step differs; with them the two runs stay bit-identical.
  auto fresh_model = copy_of(*lin);
  Learner fresh(fresh_model, learner_config(), torch::kCPU, torch::kHalf);
  fresh.start_average();
  for (int64_t step = 5; step <= 7; ++step) {
    update(saved, *lin, step);
    update(loaded, *twin, step);
    update(fresh, *fresh_model, step);
  }
  CHECK(torch::equal(lin->weight, twin->weight));
  CHECK(torch::equal(lin->bias, twin->bias));
  CHECK(torch::equal(saved.ema()->average("bias"), loaded.ema()->average("bias")));
  CHECK_FALSE(torch::equal(lin->weight, fresh_model->weight));
}

TEST_CASE("a learner refuses an archive without optimizer state by its path, and saves a loss scale only under "
          "fp16") {
  auto lin = std::make_shared<torch::nn::LinearImpl>(4, 3);
  parla::TrainingConfig t = learner_config();
  t.ema_decay = 0;
  Learner fp32(lin, t, torch::kCPU, torch::kFloat);
  CHECK_FALSE(fp32.loss_scaling());
  CHECK(fp32.ema() == nullptr);
  fp32.start_average();
  CHECK(fp32.ema() == nullptr);  // training.ema_decay 0: no average
  update(fp32, *lin, 1);
  parla::models::TensorArchive out;
  fp32.save(out);
  CHECK_FALSE(out.contains("loss_scaler"));
  CHECK(out.contains("optimizer.weight.exp_avg"));
  CHECK(out.tensor_names("weight_ema.").empty());

  parla::models::TensorArchive weights_only;
  weights_only.write("weight", lin->weight.detach());
  Learner other(copy_of(*lin), t, torch::kCPU, torch::kFloat);
  CHECK_THROWS_WITH(other.load(parla::testing::reread(weights_only), "model-only.pt"),
                    Catch::Contains("model-only.pt") && Catch::Contains("no optimizer state"));

  // An archive without an average, loaded with training.ema_decay set: the average starts from the weights.
  auto averaged_model = copy_of(*lin);
  Learner averaged(averaged_model, learner_config(), torch::kCPU, torch::kFloat);
  averaged.load(parla::testing::reread(out), "no-average.pt");
  REQUIRE(averaged.ema());
  CHECK(torch::equal(averaged.ema()->average("weight"), averaged_model->weight));
}

}  // namespace learner_tests

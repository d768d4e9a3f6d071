// The multi-tensor update (train/multi_tensor_update.h) against the per-tensor references it replaced:
// torch::optim::AdamW over 50 updates of a real model (weights and optimizer state), gradient clipping against
// the norm computed in double, the weight average against its formula.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "core/config.h"
#include "models/factory.h"
#include "models/tiny_config.h"
#include "runtime/operator_counter.h"
#include "runtime/torch_compat.h"
#include "toy_dataset.h"
#include "train/trainer.h"
#include "train/multi_tensor_update.h"
#include "train/optimizer_state.h"

namespace multi_tensor_update_tests {

using parla::models::Seq2SeqModel;

// Two identical tiny Transformers (two layers each side, tied embeddings, 60-piece vocabulary).
std::pair<std::shared_ptr<Seq2SeqModel>, std::shared_ptr<Seq2SeqModel>> twin_models() {
  auto cfg = parla::testing::tiny_transformer();
  torch::manual_seed(11);
  auto a = parla::models::build_seq2seq(cfg, 60, 60);
  torch::manual_seed(11);
  auto b = parla::models::build_seq2seq(cfg, 60, 60);
  return {a, b};
}

// Gradients of one batch's summed log-likelihood (the same batch for both models at the same step).
void backward(Seq2SeqModel& model, int64_t step) {
  torch::manual_seed(1000 + step);
  auto src = torch::randint(4, 60, {3, 7}), tgt = torch::randint(4, 60, {3, 5});
  model.train();
  auto logp = torch::log_softmax(model.forward(src, tgt), -1);
  (-logp.gather(-1, tgt.unsqueeze(-1)).sum()).backward();
}

// |a - b| within a few fp32 roundings of a's magnitude, element by element.
bool within_rounding(const torch::Tensor& a, const torch::Tensor& b) {
  auto tol = 4 * std::numeric_limits<float>::epsilon() * (a.abs() + 1e-6);
  return ((a - b).abs() <= tol).all().item<bool>();
}

torch::optim::AdamWOptions adamw_options() {
  torch::optim::AdamWOptions o(1e-3);
  o.betas({0.9, 0.98}).eps(1e-9).weight_decay(0.01);
  return o;
}

TEST_CASE("multi-tensor AdamW equals torch::optim::AdamW over 50 updates of a real model: weights, moments, steps") {
  auto [reference_model, multi_model] = twin_models();
  torch::optim::AdamW reference(reference_model->parameters(), adamw_options());
  torch::optim::AdamW multi(multi_model->parameters(), adamw_options());
  const auto ref_params = reference_model->parameters(), multi_params = multi_model->parameters();
  REQUIRE(ref_params.size() > 20);  // a real model's many tensors
  for (int64_t step = 1; step <= 50; ++step) {
    // A schedule's learning rate, changing every update.
    const double lr = 1e-3 * std::min(1.0, step / 10.0) / std::sqrt(std::max<double>(step, 10) / 10.0);
    for (auto* o : {&reference, &multi})
      for (auto& g : o->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    backward(*reference_model, step);
    backward(*multi_model, step);
    if (step >= 20 && step < 23) {
      // A parameter without a gradient is left alone, and afterwards its step count lags the others'.
      ref_params[0].mutable_grad() = torch::Tensor();
      multi_params[0].mutable_grad() = torch::Tensor();
    }
    reference.step();
    parla::train::multi_tensor_adamw_step(multi);
    reference.zero_grad();
    multi.zero_grad();
  }
  size_t exact = 0;
  for (size_t i = 0; i < ref_params.size(); ++i) {
    INFO("parameter " << i);
    REQUIRE(within_rounding(ref_params[i], multi_params[i]));
    exact += torch::equal(ref_params[i], multi_params[i]);
    const auto& rs = static_cast<const torch::optim::AdamWParamState&>(
        *reference.state().at(parla::compat::optimizer_state_key(ref_params[i])));
    const auto& ms = static_cast<const torch::optim::AdamWParamState&>(
        *multi.state().at(parla::compat::optimizer_state_key(multi_params[i])));
    CHECK(ms.step() == rs.step());
    CHECK(within_rounding(rs.exp_avg(), ms.exp_avg()));
    CHECK(within_rounding(rs.exp_avg_sq(), ms.exp_avg_sq()));
  }
  CHECK(static_cast<const torch::optim::AdamWParamState&>(
            *multi.state().at(parla::compat::optimizer_state_key(multi_params[0]))).step() == 47);
  INFO(exact << " of " << ref_params.size() << " parameters bit-identical");
#if !PARLA_TORCH2
  // LibTorch 1.13's CPU foreach operators run the reference's per-tensor operations: bit-identical.
  CHECK(exact == ref_params.size());
#endif

  // The state is AdamW's own: the checkpoint entries are written as before and resume the reference exactly.
  std::vector<std::string> names;
  for (const auto& p : multi_model->named_parameters()) names.push_back(p.key());
  parla::models::TensorArchive a;
  parla::train::save_optimizer_state(multi, names, a);
  torch::optim::AdamW resumed(multi_model->parameters(), adamw_options());
  REQUIRE(parla::train::load_optimizer_state(a, resumed, names));
  CHECK(resumed.state().size() == multi.state().size());
}

TEST_CASE("multi-tensor clipping: the norm of all gradients as computed in double, and each scaled by "
          "min(1, max / (norm + 1e-6))") {
  torch::manual_seed(4);
  std::vector<torch::Tensor> grads = {torch::randn({7, 3}), torch::randn({5}), torch::randn({2, 2, 2}) * 10};
  double sum = 0;
  for (const auto& g : grads) sum += g.to(torch::kDouble).pow(2).sum().item<double>();
  const double norm = std::sqrt(sum);
  for (const double max_norm : {0.0, 1e6, 2.0}) {
    INFO("max_norm " << max_norm);
    std::vector<torch::Tensor> copies;
    for (const auto& g : grads) copies.push_back(g.clone());
    const auto total = parla::train::clip_grad_norm(copies, max_norm);
    CHECK(total.dim() == 0);
    CHECK(total.item<double>() == Approx(norm).epsilon(1e-6));
    const double factor = max_norm > 0 ? std::min(1.0, max_norm / (norm + 1e-6)) : 1.0;
    for (size_t i = 0; i < grads.size(); ++i)
      CHECK(within_rounding(grads[i] * factor, copies[i]));
    if (factor == 1.0)
      for (size_t i = 0; i < grads.size(); ++i) CHECK(torch::equal(grads[i], copies[i]));
  }
}

TEST_CASE("multi-tensor unscaling and averaging follow their per-tensor formulas exactly") {
  torch::manual_seed(5);
  std::vector<torch::Tensor> grads = {torch::randn({4, 4}), torch::randn({3})};
  std::vector<torch::Tensor> scaled;
  for (const auto& g : grads) scaled.push_back(g * 1024);
  parla::train::unscale_gradients(scaled, 1.0 / 1024);
  for (size_t i = 0; i < grads.size(); ++i) CHECK(torch::equal(scaled[i], grads[i]));  // a power of two: exact

  std::vector<torch::Tensor> averages = {torch::randn({4, 4}), torch::randn({3})};
  std::vector<torch::Tensor> expected;
  for (size_t i = 0; i < averages.size(); ++i) expected.push_back(averages[i].mul(0.9).add(grads[i], 0.1));
  parla::train::average_into(averages, grads, 0.9);
  for (size_t i = 0; i < averages.size(); ++i) CHECK(torch::equal(averages[i], expected[i]));
}

// The operators of updates 2..4 of parla-train's loop on the toy dataset at `layers` layers per stack.
parla::runtime::OperatorCounts loop_counts(int layers, int steps) {
  const auto data = parla::test::toy_dataset("multi-tensor-ops");
  auto cfg = parla::test::toy_config(data, "multi-tensor-ops-" + std::to_string(layers));
  cfg.model.encoder_layers = cfg.model.decoder_layers = layers;
  cfg.training.max_steps = steps;
  cfg.training.valid_every = 0;
  cfg.training.log_every = 1000;
  cfg.training.clip_norm = 1.0;
  cfg.training.ema_decay = 0.99;
  parla::train::TrainerOptions o;
  o.overwrite = true;
  parla::runtime::OperatorCounter counter;
  parla::train::Trainer(cfg, o).run();
  return counter.counts();
}

TEST_CASE("the training loop's update runs the same operators at 1 and 3 layers, and reads the host once per update") {
  std::vector<parla::runtime::OperatorCounts> per_depth;
  for (const int layers : {1, 3}) {
    const auto one = loop_counts(layers, 1), four = loop_counts(layers, 4);
    INFO(layers << " layers");
    CHECK(four.host_syncs - one.host_syncs == 3);  // updates 2..4: one host read each, no stray .item()
    CHECK(four.sync_ops == one.sync_ops);
    CHECK(four.forward > one.forward);
    per_depth.push_back(four);
    per_depth.back().update -= one.update;
  }
  CHECK(per_depth[0].update == per_depth[1].update);  // clipping, AdamW and the average: constant in depth
  CHECK(per_depth[0].update / 3 <= 40);  // per update (28 today), where the per-tensor loop ran ~11 per tensor
}

}  // namespace multi_tensor_update_tests

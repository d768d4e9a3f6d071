#include <catch2/catch.hpp>

#include <cmath>

#include <torch/torch.h>

#include "train/label_smoothed_cross_entropy.h"

using parla::train::label_smoothed_cross_entropy;

namespace {

// Naive reference: build the smoothed target distribution q explicitly and sum -q log p token by token.
double naive_loss(const torch::Tensor& logits, const torch::Tensor& target, double eps, int64_t pad) {
  auto l = logits.to(torch::kDouble);
  int64_t n = l.size(0), v = l.size(1);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t y = target[i].item<int64_t>();
    if (y == pad) continue;
    double mx = l[i].max().item<double>(), z = 0;
    for (int64_t k = 0; k < v; ++k) z += std::exp(l[i][k].item<double>() - mx);
    for (int64_t k = 0; k < v; ++k) {
      double logp = l[i][k].item<double>() - mx - std::log(z);
      double q = k == y ? 1.0 - eps : eps / (v - 1);
      total -= q * logp;
    }
  }
  return total;
}

}  // namespace

TEST_CASE("label-smoothed cross entropy equals the explicit smoothed-distribution formula") {
  torch::manual_seed(3);
  auto logits = torch::randn({6, 7});
  auto target = torch::tensor({4, 0, 2, 6, 0, 1}, torch::kLong);  // 0 is padding
  for (double eps : {0.0, 0.1, 0.3}) {
    auto out = label_smoothed_cross_entropy(logits.view({2, 3, 7}), target.view({2, 3}), eps, 0);
    CHECK(out.tokens.item<int64_t>() == 4);
    CHECK(out.loss.item<double>() == Approx(naive_loss(logits, target, eps, 0)).epsilon(1e-5));
    CHECK(out.nll.item<double>() == Approx(naive_loss(logits, target, 0.0, 0)).epsilon(1e-5));
  }
}

TEST_CASE("label-smoothed cross entropy ignores padding in value and gradient") {
  auto logits = torch::randn({3, 5}, torch::requires_grad());
  auto target = torch::tensor({2, 0, 3}, torch::kLong);
  auto out = label_smoothed_cross_entropy(logits, target, 0.1, 0);
  out.loss.backward();
  CHECK(logits.grad()[1].abs().sum().item<double>() == 0.0);
  CHECK(logits.grad()[0].abs().sum().item<double>() > 0.0);
}

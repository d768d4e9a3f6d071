// nn::Linear against LibTorch's torch::nn::Linear, the layer it replaced: the same parameters from the same seed
// (draw for draw, so seeded training is unchanged), the same names, the same product; and under SkipInitialization
// a layer of the right shape that draws nothing.
#include <catch2/catch.hpp>

#include <sstream>

#include <torch/torch.h>

#include "nn/linear.h"
#include "nn/skipped_initialization.h"

TEST_CASE("nn::Linear initialises and computes as torch::nn::Linear from the same seed, with and without bias") {
  for (bool with_bias : {true, false}) {
    CAPTURE(with_bias);
    const auto options = torch::nn::LinearOptions(37, 23).bias(with_bias);
    torch::manual_seed(5);
    torch::nn::Linear reference(options);
    const auto reference_next = torch::randn({3});
    torch::manual_seed(5);
    parla::nn::Linear ours(options);
    CHECK(torch::equal(torch::randn({3}), reference_next));  // the same number of draws

    CHECK(torch::equal(ours->weight, reference->weight));
    CHECK(ours->bias.defined() == with_bias);
    if (with_bias) CHECK(torch::equal(ours->bias, reference->bias));
    CHECK(ours->named_parameters().keys() == reference->named_parameters().keys());
    CHECK(ours->weight.requires_grad());

    torch::NoGradGuard no_grad;
    const auto x = torch::randn({4, 37});
    CHECK(torch::equal(ours(x), reference(x)));
  }
}

TEST_CASE("nn::Linear under SkipInitialization has its shape and names but draws no random numbers") {
  torch::manual_seed(9);
  const auto first_draw = torch::randn({4});
  torch::manual_seed(9);
  {
    parla::nn::SkipInitialization skip;
    parla::nn::Linear l(torch::nn::LinearOptions(300, 200));
    CHECK(l->weight.sizes() == torch::IntArrayRef({200, 300}));
    CHECK(l->bias.sizes() == torch::IntArrayRef({200}));
    CHECK(l->named_parameters().keys() == std::vector<std::string>{"weight", "bias"});
  }
  CHECK(torch::equal(torch::randn({4}), first_draw));
}

TEST_CASE("nn::Linear clones into an independent layer with equal parameters, and prints its shape") {
  torch::manual_seed(2);
  parla::nn::Linear l(6, 4);
  auto copy = std::dynamic_pointer_cast<parla::nn::LinearImpl>(l->clone());
  REQUIRE(copy);
  CHECK(torch::equal(copy->weight, l->weight));
  CHECK(copy->weight.data_ptr() != l->weight.data_ptr());
  std::ostringstream s;
  l->pretty_print(s);
  CHECK(s.str() == "parla::nn::Linear(in_features=6, out_features=4, bias=true)");
}

// SkipInitialization: an embedding built under it draws no random numbers (the generator is where it was), one
// built without it is the N(0, 1/d) table it always was (the old formula, bit for bit, from the same seed); a whole
// transformer built under it draws nothing either (every module that initialises honours it).
#include <catch2/catch.hpp>

#include <cmath>

#include <torch/torch.h>

#include "models/tiny_config.h"
#include "models/factory.h"
#include "nn/embedding.h"
#include "nn/skipped_initialization.h"

using parla::nn::Embedding;
using parla::nn::SkipInitialization;

TEST_CASE("SkipInitialization holds on this thread while it lives, nested guards restore the outer state") {
  CHECK_FALSE(parla::nn::initialization_skipped());
  {
    SkipInitialization outer;
    CHECK(parla::nn::initialization_skipped());
    {
      SkipInitialization inner;
      CHECK(parla::nn::initialization_skipped());
    }
    CHECK(parla::nn::initialization_skipped());
  }
  CHECK_FALSE(parla::nn::initialization_skipped());
}

TEST_CASE("an embedding is initialised as N(0, 1/d) with a zero padding row, unless initialisation is skipped") {
  torch::NoGradGuard no_grad;
  const int64_t vocab = 301, dim = 24, pad = 3;
  torch::manual_seed(11);
  auto want = torch::randn({vocab, dim}) * std::pow(static_cast<double>(dim), -0.5);
  want[pad].zero_();
  torch::manual_seed(11);
  Embedding built(vocab, dim, true, pad);
  CHECK(torch::equal(built->weight, want));

  torch::manual_seed(11);
  const auto first_draw = torch::randn({4});
  torch::manual_seed(11);
  {
    SkipInitialization skip;
    Embedding skipped(vocab, dim, true, pad);
    CHECK(skipped->weight.sizes() == want.sizes());
    CHECK(skipped->weight.scalar_type() == torch::kFloat);
  }
  CHECK(torch::equal(torch::randn({4}), first_draw));  // nothing was drawn
}

TEST_CASE("a transformer built under SkipInitialization draws nothing and has every parameter of a normal build") {
  // Untied output and learned positions, so that every initialised parameter of the model is built.
  auto cfg = parla::testing::tiny_transformer();
  cfg.tie_output = false;
  cfg.output_bias = true;
  cfg.positions = parla::PositionEncoding::kLearned;
  torch::manual_seed(4);
  const auto normal = parla::models::build_seq2seq(cfg, 40, 50);
  torch::manual_seed(4);
  const auto first_draw = torch::randn({4});
  torch::manual_seed(4);
  std::shared_ptr<parla::models::Seq2SeqModel> skipped;
  {
    SkipInitialization skip;
    skipped = parla::models::build_seq2seq(cfg, 40, 50);
  }
  CHECK(torch::equal(torch::randn({4}), first_draw));  // nothing was drawn
  const auto want = normal->named_parameters(), got = skipped->named_parameters();
  REQUIRE(got.keys() == want.keys());
  for (const auto& p : want) CHECK(got[p.key()].sizes() == p.value().sizes());
}

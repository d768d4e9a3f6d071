// Word dropout (nn/word_dropout.h): whole token rows dropped with probability p, the rest scaled by 1/(1-p);
// checked row by row against its definition, the drop rate against the binomial distribution, through the
// Transformer encoder against a hand-built dropped input, and for each side of both models by its effect.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "models/factory.h"
#include "models/tiny_config.h"
#include "models/transformer.h"
#include "nn/word_dropout.h"
#include "support/tensors.h"

namespace word_dropout_tests {

using parla::testing::max_abs_diff;

TEST_CASE("word dropout zeroes whole rows at rate p and scales the kept rows by exactly 1/(1-p)") {
  torch::manual_seed(3);
  const double p = 0.3;
  const int64_t b = 32, t = 200, e = 8;
  auto x = torch::rand({b, t, e}) + 0.5;  // no zero entries, so a zero means dropped
  auto y = parla::nn::word_dropout(x, p, true);
  REQUIRE(y.sizes() == x.sizes());
  int64_t dropped = 0;
  double worst_kept = 0;
  bool mixed_row = false;
  auto xa = x.accessor<float, 3>();
  auto ya = y.accessor<float, 3>();
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < t; ++j) {
      int zeros = 0;
      for (int64_t k = 0; k < e; ++k) zeros += ya[i][j][k] == 0.0f;
      if (zeros == e) {
        ++dropped;
      } else {
        mixed_row |= zeros != 0;
        for (int64_t k = 0; k < e; ++k)
          worst_kept = std::max(worst_kept, std::abs(double(ya[i][j][k]) - xa[i][j][k] / (1 - p)));
      }
    }
  CHECK_FALSE(mixed_row);  // a row is dropped as a whole or kept as a whole
  CHECK(worst_kept < 1e-6);
  // The number of dropped rows is Binomial(b * t, p): within 5 standard deviations of its mean.
  const double n = double(b * t), mean = n * p, sd = std::sqrt(n * p * (1 - p));
  CHECK(std::abs(double(dropped) - mean) < 5 * sd);
}

TEST_CASE("word dropout is the identity at p = 0 and outside training, and reproducible from the seed") {
  auto x = torch::randn({4, 6, 5});
  CHECK(parla::nn::word_dropout(x, 0.0, true).equal(x));
  CHECK(parla::nn::word_dropout(x, 0.5, false).equal(x));
  torch::manual_seed(11);
  auto a = parla::nn::word_dropout(x, 0.5, true);
  torch::manual_seed(11);
  auto b = parla::nn::word_dropout(x, 0.5, true);
  CHECK(a.equal(b));
  CHECK_FALSE(a.equal(x));
  CHECK_THROWS(parla::nn::word_dropout(x, 1.0, true));
  // bf16 input: the same rows are dropped as in fp32 (the draw is made in fp32).
  torch::manual_seed(11);
  auto c = parla::nn::word_dropout(x.to(torch::kBFloat16), 0.5, true);
  CHECK(c.eq(0).all(-1).equal(a.eq(0).all(-1)));
}

TEST_CASE("transformer: source word dropout in training equals the encoder run on hand-dropped embeddings") {
  torch::manual_seed(5);
  auto cfg = parla::testing::tiny_transformer();
  cfg.dropout = 0;  // so that the only randomness is the word dropout
  cfg.source_word_dropout = 0.4;
  parla::models::TransformerModel model(cfg, 30, 30);
  auto src = torch::tensor({5, 9, 7, 11, 3, 6, 8, 4, 3, 0}, torch::kLong).view({2, 5});
  torch::NoGradGuard g;
  model.train();
  torch::manual_seed(21);
  auto got = model.encode(src);
  // The reference: draw the same keep mask, apply it by hand to the token embeddings, add the positions and run
  // the encoder in eval mode (identical to training mode when every other dropout is 0).
  torch::manual_seed(21);
  auto keep = torch::empty({2, 5, 1}).bernoulli_(0.6).div_(0.6);
  model.eval();
  auto x = model.src_embed(src) * keep + model.src_positions(5, 0, model.src_embed->weight.options());
  auto want = model.encoder(x, src.ne(0));
  CHECK(max_abs_diff(got, want) < 1e-5);
  CHECK(keep.eq(0).any().item<bool>());  // the seed drops at least one token, so the test sees a drop
  // At inference the key changes nothing.
  CHECK(max_abs_diff(model.encode(src), model.encoder(model.src_embed(src) +
                                                          model.src_positions(5, 0, model.src_embed->weight.options()),
                                                      src.ne(0))) < 1e-6);
}

TEST_CASE("transformer and rnn: source and target word dropout each change training outputs only") {
  auto src = torch::tensor({5, 9, 7, 11, 3, 6, 8, 4, 3, 0}, torch::kLong).view({2, 5});
  auto tgt = torch::tensor({2, 5, 6, 7, 2, 10, 11, 12}, torch::kLong).view({2, 4});
  for (bool rnn : {false, true})
    for (std::string side : {"source", "target"}) {
      CAPTURE(rnn, side);
      auto cfg = rnn ? parla::testing::tiny_rnn() : parla::testing::tiny_transformer();
      cfg.dropout = 0;
      torch::manual_seed(7);
      auto model = parla::models::build_seq2seq(cfg, 30, 30);
      torch::NoGradGuard g;
      model->eval();
      auto reference = model->forward(src, tgt);
      model->train();
      CHECK(max_abs_diff(model->forward(src, tgt), reference) < 1e-5);  // no word dropout: training = eval
      (side == "source" ? cfg.source_word_dropout : cfg.target_word_dropout) = 0.5;
      torch::manual_seed(7);
      auto dropping = parla::models::build_seq2seq(cfg, 30, 30);
      dropping->eval();
      CHECK(max_abs_diff(dropping->forward(src, tgt), reference) < 1e-6);  // same weights, eval: unchanged
      dropping->train();
      torch::manual_seed(8);
      CHECK(max_abs_diff(dropping->forward(src, tgt), reference) > 1e-3);
    }
}

}  // namespace word_dropout_tests

// BERT: heads, encoder transfer and the masked-LM corruption.
#include <catch2/catch.hpp>

#include <random>

#include <torch/torch.h>

#include "core/error.h"
#include "models/bert.h"
#include "models/bert_masking.h"
#include "models/factory.h"
#include "models/transformer.h"
#include "models/tiny_config.h"
#include "support/tensors.h"

using parla::testing::max_abs_diff;
using namespace parla::models;

namespace {

parla::ModelConfig tiny_bert() {
  auto c = parla::testing::tiny_transformer();
  c.type = parla::ModelType::kBert;
  c.activation = parla::Activation::kGelu;
  return c;
}
}  // namespace

TEST_CASE("BERT heads: masked-LM logits use the tied token embeddings, next-sentence reads the first token") {
  torch::manual_seed(1);
  auto bert = build_bert(tiny_bert(), 30);
  bert->eval();
  torch::NoGradGuard g;
  auto tokens = torch::tensor({2, 7, 8, 3, 9, 3, 2, 10, 3, 11, 3, 0}, torch::kLong).view({2, 6});
  auto segments = torch::tensor({0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0}, torch::kLong).view({2, 6});
  auto out = bert->forward(tokens, segments);
  CHECK(out.mlm_logits.sizes() == torch::IntArrayRef({2, 6, 30}));
  CHECK(out.nsp_logits.sizes() == torch::IntArrayRef({2, 2}));
  // Independent recomputation of the heads from the encoder output.
  auto h = bert->encode(tokens, segments);
  auto t = torch::layer_norm(torch::gelu(torch::matmul(h, bert->mlm_dense->weight.t()) + bert->mlm_dense->bias), {16},
                             bert->mlm_norm->weight, bert->mlm_norm->bias);
  CHECK(max_abs_diff(out.mlm_logits, torch::matmul(t, bert->token_embed->weight.t()) + bert->mlm_bias) < 1e-5);
  auto pooled = torch::tanh(torch::matmul(h.select(1, 0), bert->pooler->weight.t()) + bert->pooler->bias);
  CHECK(max_abs_diff(out.nsp_logits, torch::matmul(pooled, bert->nsp->weight.t()) + bert->nsp->bias) < 1e-5);
  // Asking for some positions gives exactly those rows of the full logits.
  auto wanted = torch::tensor({1, 4, 9}, torch::kLong);
  auto some = bert->forward(tokens, segments, wanted);
  CHECK(some.mlm_logits.sizes() == torch::IntArrayRef({3, 30}));
  CHECK(max_abs_diff(some.mlm_logits, out.mlm_logits.reshape({12, 30}).index_select(0, wanted)) < 1e-6);
  CHECK(max_abs_diff(some.nsp_logits, out.nsp_logits) < 1e-6);
  // Segment ids outside model.segments are rejected.
  CHECK_THROWS_AS(bert->forward(tokens, segments + 2), parla::DataError);
}

TEST_CASE("a BERT encoder initialises a transformer encoder so both encode embedded input alike") {
  torch::manual_seed(2);
  auto bert = build_bert(tiny_bert(), 30);
  auto cfg = tiny_bert();
  cfg.type = parla::ModelType::kTransformer;
  auto model = build_seq2seq(cfg, 30, 25);
  init_encoder_from_bert(*model, *bert);
  auto& t = dynamic_cast<TransformerModel&>(*model);
  t.eval();
  bert->eval();
  torch::NoGradGuard g;
  auto x = torch::randn({2, 5, 16});
  auto valid = torch::ones({2, 5}, torch::kBool);
  CHECK(max_abs_diff(t.encoder(x, valid), bert->encoder(x, valid)) == 0.0);
  CHECK(max_abs_diff(t.src_embed->weight, bert->token_embed->weight) == 0.0);
  cfg.d_model = 32;
  auto other = build_seq2seq(cfg, 30, 25);
  CHECK_THROWS_AS(init_encoder_from_bert(*other, *bert), parla::ConfigError);
}

TEST_CASE("BERT masking chooses 15% of ordinary tokens, 80% masked, 10% random, 10% unchanged, never specials") {
  const int64_t n = 200000, vocab = 50;
  std::mt19937_64 gen(123);
  std::uniform_int_distribution<int64_t> tok(0, vocab - 1);
  auto tokens = torch::empty({n}, torch::kLong);
  for (int64_t i = 0; i < n; ++i) tokens[i] = tok(gen);
  MlmMaskingOptions o;
  o.vocab_size = vocab;
  o.mask_id = 4;
  o.special_ids = {0, 1, 2, 3};
  std::mt19937_64 rng(7);
  auto ex = mask_tokens(tokens, rng, o);
  auto special = tokens.lt(5);  // 0-3 and the mask id
  auto chosen = ex.labels.ne(kIgnoreIndex);
  CHECK_FALSE(chosen.logical_and(special).any().item<bool>());
  CHECK(ex.input.masked_select(special).equal(tokens.masked_select(special)));
  CHECK(ex.labels.masked_select(chosen).equal(tokens.masked_select(chosen)));
  CHECK(ex.input.masked_select(chosen.logical_not()).equal(tokens.masked_select(chosen.logical_not())));
  const double ordinary = special.logical_not().sum().item<double>();
  const double n_chosen = chosen.sum().item<double>();
  // Binomial standard deviations are below 0.1% here; 0.6% margins are over 5 sigma.
  CHECK(n_chosen / ordinary == Approx(0.15).margin(0.006));
  auto in = ex.input.masked_select(chosen), orig = tokens.masked_select(chosen);
  const double masked = in.eq(4).sum().item<double>(), unchanged = in.eq(orig).sum().item<double>();
  CHECK(masked / n_chosen == Approx(0.8).margin(0.01));
  // Random replacements equal the original with probability 1/45 (counted as unchanged).
  CHECK(unchanged / n_chosen == Approx(0.1 + 0.1 / 45).margin(0.01));
  auto random = in.ne(4).logical_and(in.ne(orig));
  CHECK(in.masked_select(random).ge(5).all().item<bool>());  // random tokens are never special or the mask
  // Deterministic for a given seed.
  std::mt19937_64 rng2(7);
  CHECK(mask_tokens(tokens, rng2, o).input.equal(ex.input));
}

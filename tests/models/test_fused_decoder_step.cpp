// The fused CPU decoder step (models/fused_decoder_step.h) against the module path it replaces: the same bits at
// every step, for every layer arrangement and weight kind it takes, through beam reorders, sentences leaving and
// rows joining; and the module path wherever it does not apply.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "models/factory.h"
#include "models/fused_decoder_step.h"
#include "models/decoding_kind.h"
#include "models/tiny_config.h"
#include "models/transformer.h"
#include "runtime/runtime_device.h"

using namespace parla::models;
using parla::testing::tiny_transformer;

namespace {

// Source sentences of lengths 3, 7 and 11 (padded to 12): every row pads differently.
torch::Tensor sources(int64_t first_token) {
  auto src = torch::full({3, 12}, parla::kPadId, torch::kLong);
  int64_t i = 0;
  for (int64_t n : {3, 7, 11}) {
    for (int64_t j = 0; j < n; ++j) src[i][j] = first_token + (j * 5 + n) % 40;
    src[i][n] = parla::kEosId;
    ++i;
  }
  return src;
}

std::shared_ptr<TransformerModel> model_of(parla::ModelConfig cfg, const std::string& kind) {
  cfg.dropout = 0;
  auto model = std::dynamic_pointer_cast<TransformerModel>(build_seq2seq(cfg, 50, 50));
  model->eval();
  parla::testing::prepare_for_decoding(*model, kind);
  return model;
}

// One step of `decoder` over `state`, fused or through the modules (the state counts it, as the model's step does).
torch::Tensor step(TransformerDecoderImpl& decoder, TransformerState& state, const torch::Tensor& x, bool fused) {
  decoder.use_fused_step(fused);
  auto h = decoder.step(x, state.cache, state.memory_valid);
  decoder.use_fused_step(true);
  state.steps_ += 1;
  return h;
}

}  // namespace

TEST_CASE("a fused decoder step gives the modules' bits: post- and pre-norm, ReLU, GELU and swish, float, packed and "
          "int8 weights, through beam reorders and a sentence leaving") {
  for (auto norm : {parla::LayerNormPlacement::kPost, parla::LayerNormPlacement::kPre}) {
    for (auto activation : {parla::Activation::kRelu, parla::Activation::kGelu, parla::Activation::kSwish}) {
      for (std::string kind : {"fp32", "packed", "int8"}) {
        INFO((norm == parla::LayerNormPlacement::kPre ? "pre-norm " : "post-norm ") << static_cast<int>(activation)
                                                                                     << " " << kind);
        torch::manual_seed(5);
        auto cfg = tiny_transformer();
        cfg.d_model = 24;  // head size 6 and widths 24 / 72 / 40: vector tails everywhere
        cfg.ffn_dim = 40;
        cfg.norm = norm;
        cfg.activation = activation;
        auto model = model_of(cfg, kind);
        torch::NoGradGuard no_grad;
        auto& decoder = *model->decoder;
        REQUIRE(fused_step_supported(decoder));
        auto src = sources(4);
        auto fused = model->start(src), modules = model->start(src);
        auto beams = torch::arange(3, torch::kLong).repeat_interleave(2);
        fused->reorder_beams(beams, {}, 2);
        modules->reorder_beams(beams, {}, 2);
        auto& f = dynamic_cast<TransformerState&>(*fused);
        auto& m = dynamic_cast<TransformerState&>(*modules);
        for (int t = 0; t < 20; ++t) {  // past the cache's first 16 slots: its buffers grow once
          INFO("step " << t);
          const int64_t sentences_left = f.cache.memory_rows.defined() ? f.cache.memory_rows.numel() : 3;
          const int64_t rows = sentences_left * 2;
          auto x = torch::randn({rows, 1, cfg.d_model});
          REQUIRE(fused_step_applies(decoder, x));
          CHECK(torch::equal(step(decoder, f, x, true), step(decoder, m, x, false)));
          // A beam reorder (rows within each sentence, one repeated), and at step 6 the middle sentence leaves.
          std::vector<int64_t> order;
          for (int64_t s = 0; s < rows / 2; ++s) {
            order.push_back(2 * s + (t % 2));
            order.push_back(2 * s + (t % 3 == 0 ? 0 : 1));
          }
          torch::Tensor sentences;
          if (t == 6) {
            order = {order[0], order[1], order[4], order[5]};
            sentences = torch::tensor(std::vector<int64_t>{0, 2}, torch::kLong);
          }
          auto r = torch::tensor(order, torch::kLong);
          f.reorder_beams(r, sentences, 2);
          m.reorder_beams(r, sentences, 2);
          // The sentence that left is renumbered away, not copied out: the fused step reads through the map,
          // the modules gather it.
          if (t >= 6) CHECK(f.cache.memory_rows.defined());
          if (t >= 6) CHECK(f.cache.cross_k[0].size(0) == 3);
        }
      }
    }
  }
}

TEST_CASE("a fused decoder step gives the modules' bits after rows join a running batch (continuous batching)") {
  for (std::string kind : {"fp32", "int8"}) {
    INFO(kind);
    torch::manual_seed(8);
    auto model = model_of(tiny_transformer(), kind);
    torch::NoGradGuard no_grad;
    auto& decoder = *model->decoder;
    auto fused = model->start(sources(4)), modules = model->start(sources(4));
    auto& f = dynamic_cast<TransformerState&>(*fused);
    auto& m = dynamic_cast<TransformerState&>(*modules);
    for (int t = 0; t < 8; ++t) {
      INFO("step " << t);
      if (t == 3) {  // three more sentences join at their own position 0
        auto a = model->start(sources(9)), b = model->start(sources(9));
        REQUIRE(f.append(*a));
        REQUIRE(m.append(*b));
        REQUIRE(f.cache.self[0].kv.row_first().defined());
      }
      auto x = torch::randn({f.memory_valid.size(0), 1, 16});
      REQUIRE(fused_step_applies(decoder, x));
      CHECK(torch::equal(step(decoder, f, x, true), step(decoder, m, x, false)));
    }
  }
}

TEST_CASE("sentences leaving a CPU batch are renumbered, and a step that is not fused gathers their memory first") {
  torch::manual_seed(9);
  auto model = model_of(tiny_transformer(), "int8");
  torch::NoGradGuard no_grad;
  auto src = sources(4);
  auto a = model->start(src), b = model->start(src);
  auto prev = torch::full({3}, model->start_id(), torch::kLong);
  model->step(prev, *a);
  model->step(prev, *b);
  auto keep = torch::tensor(std::vector<int64_t>{2, 0}, torch::kLong);
  a->reorder(keep);
  b->reorder(keep);
  auto& sa = dynamic_cast<TransformerState&>(*a);
  auto& sb = dynamic_cast<TransformerState&>(*b);
  REQUIRE(sa.cache.memory_rows.defined());
  CHECK(sa.memory_valid.size(0) == 3);  // nothing copied
  auto next = torch::tensor(std::vector<int64_t>{7, 9}, torch::kLong);
  torch::Tensor attention;
  auto fused = model->step(next, *a);                // the fused step, through the map
  auto modules = model->step(next, *b, &attention);  // alignments: the modules, after gathering
  CHECK(sa.cache.memory_rows.defined());
  CHECK_FALSE(sb.cache.memory_rows.defined());
  CHECK(sb.memory_valid.size(0) == 2);
  CHECK(sb.cache.cross_k[0].size(0) == 2);
  CHECK(torch::equal(sb.memory_valid, src.index_select(0, keep).ne(parla::kPadId)));
  CHECK(torch::equal(fused, modules));
}

TEST_CASE("the fused step is not taken where it does not apply: other self-attention variants, training mode, "
          "gradients, CPU autocast") {
  torch::manual_seed(3);
  auto cfg = tiny_transformer();
  cfg.decoder_attention = parla::AttentionKind::kLocal;
  auto local = model_of(cfg, "fp32");
  CHECK_FALSE(fused_step_supported(*local->decoder));

  auto model = model_of(tiny_transformer(), "fp32");
  auto& decoder = *model->decoder;
  auto x = torch::randn({6, 1, 16});
  {
    torch::NoGradGuard no_grad;
    CHECK(fused_step_applies(decoder, x));
    CHECK_FALSE(fused_step_applies(decoder, x.to(torch::kDouble)));
    model->train();
    CHECK_FALSE(fused_step_applies(decoder, x));
    model->eval();
    parla::runtime::AutocastScope autocast(torch::Device(torch::kCPU), torch::kBFloat16);
    CHECK_FALSE(fused_step_applies(decoder, x));
  }
  torch::AutoGradMode grad(true);
  CHECK_FALSE(fused_step_applies(decoder, x));
}

TEST_CASE("runtime.fused_decoder_step false builds decoders that run their modules, to compare") {
  torch::manual_seed(4);
  auto x = torch::randn({6, 1, 16});
  torch::NoGradGuard no_grad;
  auto fused = model_of(tiny_transformer(), "fp32");
  CHECK(fused->decoder->fused_step_for(x, false));
  parla::testing::ScopedRuntime off([](parla::RuntimeConfig& rc) { rc.fused_decoder_step = false; });
  auto modules = model_of(tiny_transformer(), "fp32");
  CHECK_FALSE(modules->decoder->fused_step_for(x, false));
  CHECK(fused_step_applies(*modules->decoder, x));  // it would apply: the switch alone keeps it off
}

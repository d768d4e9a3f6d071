// The Transformer translation model: incremental decoding, masks, positions, sizes.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include <torch/torch.h>

#include "support/choice.h"
#include "core/error.h"
#include "models/factory.h"
#include "models/int8_quantization.h"
#include "models/packed_fp32.h"
#include "models/transformer.h"
#include "models/decoding_kind.h"
#include "models/tiny_config.h"
#include "runtime/runtime_device.h"
#include "support/cuda.h"
#include "support/tensors.h"

using parla::testing::max_abs_diff;
using namespace parla::models;
using parla::testing::tiny_transformer;

namespace {


// Source batch with padding: row 1 is two tokens shorter.
torch::Tensor sample_src() {
  return torch::tensor({5, 9, 7, 11, 3, 6, 8, 4, 3, 0}, torch::kLong).view({2, 5});
}

// Runs `model` step by step over tgt_in and compares each step's log-probs with the teacher-forced pass.
double incremental_vs_full(Seq2SeqModel& model, const torch::Tensor& src, const torch::Tensor& tgt_in) {
  torch::NoGradGuard g;
  model.eval();
  auto full = torch::log_softmax(model.forward(src, tgt_in), -1);
  auto state = model.start(src);
  double worst = 0;
  for (int64_t t = 0; t < tgt_in.size(1); ++t) {
    auto lp = model.step(tgt_in.select(1, t), *state);
    worst = std::max(worst, max_abs_diff(lp, full.select(1, t)));
  }
  CHECK(state->steps() == tgt_in.size(1));
  return worst;
}

}  // namespace

TEST_CASE("transformer incremental decoding equals full-sequence decoding for every norm, position and attention") {
  torch::manual_seed(1);
  auto tgt = torch::tensor({2, 5, 6, 7, 8, 9, 2, 10, 11, 12, 13, 14}, torch::kLong).view({2, 6});
  for (std::string norm : {"post", "pre"})
    for (std::string positions : {"sinusoidal", "learned"})
      for (std::string attention : {"full", "local", "linear", "sparse", "routing", "performer"}) {
        auto cfg = tiny_transformer();
        cfg.norm = parla::testing::choice<parla::LayerNormPlacement>(norm);
        cfg.positions = parla::testing::choice<parla::PositionEncoding>(positions);
        cfg.attention = parla::testing::choice<parla::AttentionKind>(attention);
        cfg.local_window = 2;
        cfg.sparse_block_size = 2;  // so that the patterns leave pairs out of 6 positions
        cfg.routing_clusters = 3;
        cfg.activation = norm == "pre" ? parla::Activation::kGelu : parla::Activation::kRelu;
        auto model = build_seq2seq(cfg, 20, 24);
        INFO(norm << " " << positions << " " << attention);
        CHECK(incremental_vs_full(*model, sample_src(), tgt) < 1e-5);
      }
}

TEST_CASE("transformer state reordering equals decoding the reordered batch") {
  torch::manual_seed(2);
  auto model = build_seq2seq(tiny_transformer(), 20, 20);
  model->eval();
  torch::NoGradGuard g;
  auto src = sample_src();
  auto order = torch::tensor({1, 1, 0}, torch::kLong);
  auto a = model->start(src);
  auto b = model->start(src.index_select(0, order));
  auto prev = torch::tensor({2, 2}, torch::kLong);
  model->step(prev, *a);
  model->step(prev.index_select(0, order), *b);
  a->reorder(order);
  auto next = torch::tensor({7, 8, 9}, torch::kLong);
  torch::Tensor att_a, att_b;
  auto la = model->step(next, *a, &att_a), lb = model->step(next, *b, &att_b);
  CHECK(max_abs_diff(la, lb) < 1e-6);
  CHECK(max_abs_diff(att_a, att_b) < 1e-6);
}

TEST_CASE("transformer beam reordering (memory kept once per sentence) equals decoding the reordered rows") {
  torch::manual_seed(4);
  for (std::string attention : {"full", "linear"}) {
    auto cfg = tiny_transformer();
    cfg.attention = parla::testing::choice<parla::AttentionKind>(attention);
    auto model = build_seq2seq(cfg, 20, 20);
    model->eval();
    torch::NoGradGuard g;
    auto src = sample_src();
    // Reference: one memory row per hypothesis row, reordered with reorder().
    // Grouped: beams of 3 per sentence from the start; sentence 0 then finishes and leaves the batch.
    auto a = model->start(src), b = model->start(src);
    auto expand = torch::tensor({0, 0, 0, 1, 1, 1}, torch::kLong);
    a->reorder(expand);
    b->reorder_beams(expand, {}, 3);
    auto prev = torch::tensor({2, 2, 2, 2, 2, 2}, torch::kLong);
    auto la = model->step(prev, *a), lb = model->step(prev, *b);
    CHECK(max_abs_diff(la, lb) < 1e-6);
    auto rows = torch::tensor({2, 0, 0, 5, 3, 4}, torch::kLong);  // parents within each sentence's beams
    a->reorder(rows);
    b->reorder_beams(rows, {}, 3);
    auto next = torch::tensor({7, 8, 9, 10, 11, 12}, torch::kLong);
    la = model->step(next, *a);
    lb = model->step(next, *b);
    CHECK(max_abs_diff(la, lb) < 1e-6);
    auto survivors = torch::tensor({4, 4, 3}, torch::kLong);  // sentence 1 only
    a->reorder(survivors);
    b->reorder_beams(survivors, torch::tensor({1}, torch::kLong), 3);
    next = torch::tensor({5, 6, 7}, torch::kLong);
    torch::Tensor att_a, att_b;
    la = model->step(next, *a, &att_a);
    lb = model->step(next, *b, &att_b);
    INFO(attention);
    CHECK(max_abs_diff(la, lb) < 1e-6);
    CHECK(max_abs_diff(att_a, att_b) < 1e-6);
    // A plain reorder after grouped ones (as greedy search does) still sees the right memory rows.
    a->reorder(torch::tensor({2}, torch::kLong));
    b->reorder(torch::tensor({2}, torch::kLong));
    la = model->step(torch::tensor({9}, torch::kLong), *a);
    lb = model->step(torch::tensor({9}, torch::kLong), *b);
    CHECK(max_abs_diff(la, lb) < 1e-6);
  }
}

TEST_CASE("transformer step attention is a distribution over the real source tokens") {
  torch::manual_seed(3);
  auto model = build_seq2seq(tiny_transformer(), 20, 20);
  model->eval();
  torch::NoGradGuard g;
  auto state = model->start(sample_src());
  torch::Tensor att;
  auto lp = model->step(torch::tensor({2, 2}, torch::kLong), *state, &att);
  CHECK(att.sizes() == torch::IntArrayRef({2, 5}));
  CHECK(att[1][4].item<double>() == 0.0);
  CHECK(max_abs_diff(att.sum(-1), torch::ones({2})) < 1e-5);
  CHECK(max_abs_diff(lp.exp().sum(-1), torch::ones({2})) < 1e-5);
}

TEST_CASE("decoder output at step t does not depend on later target tokens") {
  torch::manual_seed(4);
  auto model = build_seq2seq(tiny_transformer(), 20, 20);
  model->eval();
  torch::NoGradGuard g;
  auto tgt = torch::tensor({2, 5, 6, 7, 8}, torch::kLong).view({1, 5});
  auto changed = tgt.clone();
  changed[0][3] = 12;
  changed[0][4] = 13;
  auto src = sample_src().narrow(0, 0, 1);
  auto a = model->forward(src, tgt), b = model->forward(src, changed);
  CHECK(max_abs_diff(a.narrow(1, 0, 3), b.narrow(1, 0, 3)) == 0.0);
  CHECK(max_abs_diff(a.narrow(1, 3, 2), b.narrow(1, 3, 2)) > 1e-4);
}

TEST_CASE("source padding does not change the translation model's output") {
  torch::manual_seed(5);
  auto model = build_seq2seq(tiny_transformer(), 20, 20);
  model->eval();
  torch::NoGradGuard g;
  auto tgt = torch::tensor({2, 5, 6}, torch::kLong).view({1, 3});
  auto short_src = torch::tensor({6, 8, 3}, torch::kLong).view({1, 3});
  auto padded = torch::tensor({6, 8, 3, 0, 0}, torch::kLong).view({1, 5});
  CHECK(max_abs_diff(model->forward(short_src, tgt), model->forward(padded, tgt)) < 1e-5);
}

TEST_CASE("source padding does not change the output for any encoder self-attention variant") {
  torch::manual_seed(6);
  auto tgt = torch::tensor({2, 5, 6}, torch::kLong).view({1, 3});
  auto short_src = torch::tensor({6, 8, 3, 9, 7, 3}, torch::kLong).view({1, 6});
  auto padded = torch::tensor({6, 8, 3, 9, 7, 3, 0, 0, 0}, torch::kLong).view({1, 9});
  for (std::string attention : {"full", "local", "linear", "sparse", "routing", "performer", "nystrom"}) {
    auto cfg = tiny_transformer();
    cfg.encoder_attention = parla::testing::choice<parla::AttentionKind>(attention);
    cfg.decoder_attention = parla::testing::choice<parla::AttentionKind>(attention == "nystrom" ? "sparse" : attention);
    cfg.local_window = 1;
    cfg.sparse_block_size = 2;
    cfg.routing_clusters = 2;
    cfg.nystrom_landmarks = 4;
    cfg.nystrom_conv_kernel = 3;
    auto model = build_seq2seq(cfg, 20, 20);
    model->eval();
    torch::NoGradGuard g;
    INFO(attention);
    CHECK(max_abs_diff(model->forward(short_src, tgt), model->forward(padded, tgt)) < 1e-5);
    CHECK(incremental_vs_full(*model, padded, tgt) < 1e-5);
  }
}

TEST_CASE("the encoder with positions is not permutation-equivariant, without them its layers are") {
  torch::manual_seed(6);
  auto cfg = tiny_transformer();
  TransformerModel model(cfg, 20, 20);
  model.eval();
  torch::NoGradGuard g;
  auto src = torch::tensor({5, 9, 7, 11, 3}, torch::kLong).view({1, 5});
  auto perm = torch::tensor({4, 2, 0, 3, 1}, torch::kLong);
  auto with_pos = model.encode(src), with_pos_perm = model.encode(src.index_select(1, perm));
  CHECK(max_abs_diff(with_pos_perm, with_pos.index_select(1, perm)) > 1e-3);
  auto emb = model.src_embed(src);
  auto no_pos = model.encoder(emb, src.ne(0)), no_pos_perm = model.encoder(emb.index_select(1, perm), src.ne(0));
  CHECK(max_abs_diff(no_pos_perm, no_pos.index_select(1, perm)) < 1e-5);
}

TEST_CASE("the base preset with a 37k shared tied vocabulary has the parameter count of its layer sizes") {
  parla::ModelConfig cfg;
  cfg.preset = "base";
  cfg.share_embeddings = true;
  cfg.tie_output = true;
  // Sizes of Table 3 (base): d = 512, d_ff = 2048, 6 + 6 layers; counted from the formula, not the model.
  const int64_t V = 37000, d = 512, f = 2048, N = 6;
  const int64_t attention = 4 * (d * d + d);          // W^Q, W^K, W^V, W^O with biases
  const int64_t ffn = d * f + f + f * d + d;
  const int64_t norm = 2 * d;
  const int64_t expected = V * d + N * (attention + ffn + 2 * norm) + N * (2 * attention + ffn + 3 * norm);
  auto model = build_seq2seq(cfg, V, V);
  int64_t count = 0;
  for (const auto& p : model->parameters()) count += p.numel();
  CHECK(count == expected);
  CHECK(count > 62'000'000);
  CHECK(count < 65'000'000);  // the paper reports 65M
}

TEST_CASE("shared embeddings with different vocabulary sizes are a ConfigError naming the key") {
  auto cfg = tiny_transformer();
  cfg.share_embeddings = true;
  try {
    build_seq2seq(cfg, 20, 30);
    FAIL("expected a ConfigError");
  } catch (const parla::ConfigError& e) {
    CHECK(std::string(e.what()).find("model.share_embeddings") != std::string::npos);
  }
  cfg.type = parla::ModelType::kBert;
  CHECK_THROWS_AS(build_seq2seq(cfg, 20, 20), parla::ConfigError);
}

TEST_CASE("a transformer with learned positions reports and enforces its maximum length") {
  auto cfg = tiny_transformer();
  cfg.positions = parla::PositionEncoding::kLearned;
  cfg.max_positions = 6;
  auto model = build_seq2seq(cfg, 20, 20);
  CHECK(model->max_positions() == 6);
  auto src = torch::full({1, 7}, 5, torch::kLong);
  CHECK_THROWS_AS(model->forward(src, torch::full({1, 2}, 2, torch::kLong)), parla::DataError);
  cfg.positions = parla::PositionEncoding::kSinusoidal;
  CHECK(build_seq2seq(cfg, 20, 20)->max_positions() == INT64_MAX);
}

TEST_CASE("Marian's variant (swish, concatenated positions, unscaled embeddings, an output bias) decodes "
          "incrementally as it decodes whole, and the bias shifts every logit by its own value") {
  torch::manual_seed(5);
  auto cfg = tiny_transformer();
  cfg.activation = parla::Activation::kSwish;
  cfg.sinusoidal_layout = parla::SinusoidalLayout::kConcatenated;
  cfg.scale_embeddings = false;
  cfg.output_bias = true;
  auto model = std::dynamic_pointer_cast<TransformerModel>(build_seq2seq(cfg, 20, 24));
  REQUIRE(model->output_bias.defined());
  auto tgt = torch::tensor({2, 5, 6, 7, 8, 9, 2, 10, 11, 12, 13, 14}, torch::kLong).view({2, 6});
  torch::NoGradGuard g;
  model->eval();
  auto before = model->forward(sample_src(), tgt);
  auto bias = torch::randn({24});
  model->output_bias.copy_(bias);
  CHECK(max_abs_diff(model->forward(sample_src(), tgt), before + bias) < 1e-5);
  CHECK(incremental_vs_full(*model, sample_src(), tgt) < 1e-5);
  // Unscaled: an embedding is the table's row itself, not sqrt(d) times it.
  auto ids = torch::tensor({{5, 6}}, torch::kLong);
  CHECK(max_abs_diff(model->tgt_embed->forward(ids), model->tgt_embed->weight.index_select(0, ids.view(-1)).view({1, 2, -1})) == 0);
}

TEST_CASE("every output projection gives the bits of adding the output bias afterwards (the packed one adds it as it "
          "writes, the others in place), tied or not") {
  for (bool tied : {true, false}) {
    for (std::string kind : {"fp32", "packed", "int8"}) {
      INFO((tied ? "tied " : "untied ") << kind);
      torch::manual_seed(6);
      auto cfg = tiny_transformer();
      cfg.output_bias = true;
      cfg.tie_output = tied;
      cfg.share_embeddings = false;
      auto model = std::dynamic_pointer_cast<TransformerModel>(build_seq2seq(cfg, 20, 70));  // tails of 64 columns
      model->eval();
      parla::testing::prepare_for_decoding(*model, kind);
      torch::NoGradGuard g;
      model->output_bias.normal_();
      auto h = torch::randn({7, cfg.d_model});
      const auto bias = model->output_bias;
      model->output_bias = torch::Tensor();
      auto without = model->output_logits(h);
      model->output_bias = bias;
      CHECK(torch::equal(model->output_logits(h), without + bias));
    }
  }
}

TEST_CASE("forward and backward produce logits of the target vocabulary and gradients for every parameter") {
  torch::manual_seed(7);
  auto cfg = tiny_transformer();
  cfg.tie_output = false;
  auto model = build_seq2seq(cfg, 20, 24);
  model->train();
  auto logits = model->forward(sample_src(), torch::tensor({2, 5, 6, 2, 7, 0}, torch::kLong).view({2, 3}));
  CHECK(logits.sizes() == torch::IntArrayRef({2, 3, 24}));
  logits.logsumexp(-1).sum().backward();
  for (const auto& p : model->named_parameters()) {
    INFO(p.key());
    CHECK(p.value().grad().defined());
  }
}

TEST_CASE("a transformer on a GPU computes the CPU's outputs and gradients (fp32) and close outputs (bf16)", "[cuda]") {
  PARLA_REQUIRE_CUDA();
  at::globalContext().setAllowTF32CuBLAS(false);  // TF32 matmuls would differ from the CPU by ~1e-3
  at::globalContext().setAllowTF32CuDNN(false);
  const torch::Device gpu(torch::kCUDA, 0);
  auto tgt_in = torch::tensor({2, 5, 6, 7, 8, 2, 10, 11, 12, 0}, torch::kLong).view({2, 5});
  for (std::string positions : {"sinusoidal", "learned"}) {
    INFO(positions);
    torch::manual_seed(7);
    auto cfg = tiny_transformer();
    cfg.dropout = 0;
    cfg.positions = parla::testing::choice<parla::PositionEncoding>(positions);
    auto cpu = build_seq2seq(cfg, 20, 24);
    auto gpu_model = build_seq2seq(cfg, 20, 24);
    {
      torch::NoGradGuard g;
      auto from = cpu->parameters(), to = gpu_model->parameters();
      for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
    }
    gpu_model->to(gpu);
    auto loss_of = [&](Seq2SeqModel& m, const torch::Device& d) {
      auto logits = m.forward(sample_src().to(d), tgt_in.to(d));
      return std::make_pair(logits, torch::log_softmax(logits, -1).select(-1, 3).sum());
    };
    auto [cpu_logits, cpu_loss] = loss_of(*cpu, torch::kCPU);
    auto [gpu_logits, gpu_loss] = loss_of(*gpu_model, gpu);
    CHECK(gpu_logits.device() == gpu);
    CHECK(max_abs_diff(cpu_logits, gpu_logits.cpu()) < 1e-4);
    cpu_loss.backward();
    gpu_loss.backward();
    auto a = cpu->named_parameters(), b = gpu_model->named_parameters();
    for (const auto& p : a) {
      INFO(p.key());
      REQUIRE(b[p.key()].grad().defined());
      CHECK(max_abs_diff(p.value().grad(), b[p.key()].grad().cpu()) < 1e-4);
    }
  }
}

TEST_CASE("a transformer under bf16 autocast on a GPU gives the fp32 CPU outputs within bf16 precision",
          "[cuda]") {
  PARLA_REQUIRE_CUDA();
  at::globalContext().setAllowTF32CuBLAS(false);
  const torch::Device gpu(torch::kCUDA, 0);
  auto tgt_in = torch::tensor({2, 5, 6, 7, 8, 2, 10, 11, 12, 0}, torch::kLong).view({2, 5});
  torch::manual_seed(8);
  auto cfg = tiny_transformer();
  cfg.dropout = 0;
  auto model = build_seq2seq(cfg, 20, 24);
  model->eval();
  torch::NoGradGuard g;
  auto reference = model->forward(sample_src(), tgt_in);
  model->to(gpu);
  torch::Tensor bf16;
  {
    parla::runtime::AutocastScope autocast(gpu, parla::runtime::resolve_precision(parla::Precision::kBf16, gpu, "test"));
    bf16 = model->forward(sample_src().to(gpu), tgt_in.to(gpu)).to(torch::kFloat).cpu();
  }
  // bfloat16 keeps 8 bits of mantissa (relative error 2^-8 per rounding); a few roundings per layer on logits
  // of magnitude ~3 stay well inside 0.1.
  CHECK(max_abs_diff(reference, bf16) < 0.1);
}

TEST_CASE("in inference, a sentence's encoder output is the same bits alone and padded in a batch (fp32, packed, "
          "int8), and within rounding of the training path's") {
  for (std::string kind : {"fp32", "packed", "int8"}) {
    INFO(kind);
    torch::manual_seed(21);
    auto cfg = tiny_transformer();
    cfg.dropout = 0;
    auto model = std::dynamic_pointer_cast<TransformerModel>(build_seq2seq(cfg, 60, 60));
    model->eval();
    parla::testing::prepare_for_decoding(*model, kind);
    torch::NoGradGuard no_grad;
    // Lengths 3, 9, 17, 30 padded to 31: every padding amount, and tails of every vector width.
    std::vector<std::vector<int64_t>> sentences;
    for (int64_t n : {3, 9, 17, 30}) {
      std::vector<int64_t> s;
      for (int64_t i = 0; i < n; ++i) s.push_back(4 + (i * 7 + n) % 56);
      s.push_back(parla::kEosId);
      sentences.push_back(s);
    }
    auto batch = torch::full({4, 31}, parla::kPadId, torch::kLong);
    for (int64_t i = 0; i < 4; ++i)
      batch[i].narrow(0, 0, static_cast<int64_t>(sentences[i].size())).copy_(torch::tensor(sentences[i], torch::kLong));
    auto together = model->encode(batch);
    for (int64_t i = 0; i < 4; ++i) {
      auto alone = model->encode(torch::tensor(sentences[i], torch::kLong).unsqueeze(0));
      const int64_t n = alone.size(1);
      if (kind != "fp32") {  // LibTorch's own products (unpacked fp32) are not row-for-row invariant themselves
        CHECK(torch::equal(together[i].narrow(0, 0, n), alone[0]));
      } else {
        CHECK(max_abs_diff(together[i].narrow(0, 0, n), alone[0]) < 1e-5);
      }
    }
    // The same layers with gradients on take LibTorch's path (training): the same values within rounding.
    if (kind == "fp32") {
      torch::GradMode::set_enabled(true);
      auto src = batch.clone();
      for (auto& p : model->parameters()) p.set_requires_grad(true);
      auto trained = model->encode(src);
      torch::GradMode::set_enabled(false);
      CHECK(max_abs_diff(trained.detach(), together) < 1e-5);
    }
  }
}

// The attentional RNN encoder-decoder.
#include <catch2/catch.hpp>

#include <string>

#include <torch/torch.h>

#include "support/choice.h"
#include "core/error.h"
#include "models/factory.h"
#include "models/rnn.h"
#include "models/tiny_config.h"
#include "support/tensors.h"

using parla::testing::max_abs_diff;
using namespace parla::models;
using parla::testing::tiny_rnn;

TEST_CASE("rnn incremental decoding equals full-sequence decoding for each cell, attention and input feeding") {
  torch::manual_seed(1);
  auto src = torch::tensor({5, 9, 7, 11, 3, 6, 8, 3, 0, 0}, torch::kLong).view({2, 5});
  auto tgt = torch::tensor({2, 5, 6, 7, 2, 10, 11, 12}, torch::kLong).view({2, 4});
  for (std::string cell : {"gru", "lstm"})
    for (std::string attention : {"bahdanau", "luong"})
      for (bool feeding : {true, false}) {
        auto cfg = tiny_rnn();
        cfg.rnn_cell = parla::testing::choice<parla::RnnCell>(cell);
        cfg.rnn_attention = parla::testing::choice<parla::RnnAttention>(attention);
        cfg.input_feeding = feeding;
        cfg.tie_output = feeding;
        auto model = build_seq2seq(cfg, 20, 24);
        model->eval();
        torch::NoGradGuard g;
        auto full = torch::log_softmax(model->forward(src, tgt), -1);
        auto state = model->start(src);
        INFO(cell << " " << attention << " feeding=" << feeding);
        for (int64_t t = 0; t < 4; ++t) {
          torch::Tensor att;
          auto lp = model->step(tgt.select(1, t), *state, &att);
          CHECK(max_abs_diff(lp, full.select(1, t)) < 1e-5);
          CHECK(att[1].narrow(0, 3, 2).eq(0).all().item<bool>());
          CHECK(max_abs_diff(att.sum(-1), torch::ones({2})) < 1e-5);
        }
      }
}

TEST_CASE("rnn source padding does not change the output (packed bidirectional encoder)") {
  torch::manual_seed(2);
  auto model = build_seq2seq(tiny_rnn(), 20, 20);
  model->eval();
  torch::NoGradGuard g;
  auto tgt = torch::tensor({2, 5, 6}, torch::kLong).view({1, 3});
  auto a = model->forward(torch::tensor({6, 8, 3}, torch::kLong).view({1, 3}), tgt);
  auto b = model->forward(torch::tensor({6, 8, 3, 0, 0}, torch::kLong).view({1, 5}), tgt);
  CHECK(max_abs_diff(a, b) < 1e-5);
}

TEST_CASE("rnn state reordering equals decoding the reordered batch") {
  torch::manual_seed(3);
  auto cfg = tiny_rnn();
  cfg.rnn_cell = parla::RnnCell::kLstm;
  auto model = build_seq2seq(cfg, 20, 20);
  model->eval();
  torch::NoGradGuard g;
  auto src = torch::tensor({5, 9, 7, 3, 6, 8, 3, 0}, torch::kLong).view({2, 4});
  auto order = torch::tensor({1, 0, 0}, torch::kLong);
  auto a = model->start(src), b = model->start(src.index_select(0, order));
  auto prev = torch::tensor({2, 2}, torch::kLong);
  model->step(prev, *a);
  model->step(prev.index_select(0, order), *b);
  a->reorder(order);
  auto next = torch::tensor({7, 8, 9}, torch::kLong);
  CHECK(max_abs_diff(model->step(next, *a), model->step(next, *b)) < 1e-6);
}

TEST_CASE("rnn tied output needs embed_dim equal to rnn_hidden") {
  auto cfg = tiny_rnn();
  cfg.embed_dim = 8;
  CHECK_THROWS_AS(build_seq2seq(cfg, 20, 20), parla::ConfigError);
  cfg.tie_output = false;
  auto model = build_seq2seq(cfg, 20, 24);
  model->train();
  auto logits = model->forward(torch::tensor({5, 6, 3}, torch::kLong).view({1, 3}),
                               torch::tensor({2, 7}, torch::kLong).view({1, 2}));
  CHECK(logits.sizes() == torch::IntArrayRef({1, 2, 24}));
  logits.sum().backward();
  for (const auto& p : model->named_parameters()) {
    INFO(p.key());
    CHECK(p.value().grad().defined());
  }
}

TEST_CASE("rnn beam reordering (source kept once per sentence) equals decoding the reordered rows") {
  for (std::string attention : {"bahdanau", "luong"}) {
    torch::manual_seed(5);
    auto cfg = tiny_rnn();
    cfg.rnn_attention = parla::testing::choice<parla::RnnAttention>(attention);
    cfg.rnn_cell = attention == "luong" ? parla::RnnCell::kLstm : parla::RnnCell::kGru;
    auto model = build_seq2seq(cfg, 20, 20);
    model->eval();
    torch::NoGradGuard g;
    auto src = torch::tensor({5, 9, 7, 3, 6, 8, 3, 0}, torch::kLong).view({2, 4});
    // Reference: one source row per hypothesis row, reordered with reorder(). Grouped: beams of 3 per
    // sentence from the start; sentence 0 then finishes and leaves the batch.
    auto a = model->start(src), b = model->start(src);
    auto expand = torch::tensor({0, 0, 0, 1, 1, 1}, torch::kLong);
    a->reorder(expand);
    b->reorder_beams(expand, {}, 3);
    auto prev = torch::tensor({2, 2, 2, 2, 2, 2}, torch::kLong);
    CHECK(max_abs_diff(model->step(prev, *a), model->step(prev, *b)) < 1e-6);
    auto rows = torch::tensor({2, 0, 0, 5, 3, 4}, torch::kLong);  // parents within each sentence's beams
    a->reorder(rows);
    b->reorder_beams(rows, {}, 3);
    auto next = torch::tensor({7, 8, 9, 10, 11, 12}, torch::kLong);
    CHECK(max_abs_diff(model->step(next, *a), model->step(next, *b)) < 1e-6);
    auto survivors = torch::tensor({4, 4, 3}, torch::kLong);  // sentence 1 only
    a->reorder(survivors);
    b->reorder_beams(survivors, torch::tensor({1}, torch::kLong), 3);
    torch::Tensor att_a, att_b;
    next = torch::tensor({5, 6, 7}, torch::kLong);
    INFO(attention);
    CHECK(max_abs_diff(model->step(next, *a, &att_a), model->step(next, *b, &att_b)) < 1e-6);
    CHECK(att_b.sizes() == torch::IntArrayRef({3, 4}));
    CHECK(max_abs_diff(att_a, att_b) < 1e-6);
    // A plain reorder after grouped ones (as greedy search does) still sees the right source rows.
    a->reorder(torch::tensor({2}, torch::kLong));
    b->reorder(torch::tensor({2}, torch::kLong));
    CHECK(max_abs_diff(model->step(torch::tensor({9}, torch::kLong), *a),
                       model->step(torch::tensor({9}, torch::kLong), *b)) < 1e-6);
  }
}

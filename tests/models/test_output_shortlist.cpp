// The output layer restricted to per-sentence vocabularies (models/output_shortlist.h): the log-softmax over each
// row's own vocabulary against the brute-force formula (log_softmax of the gathered logits), and a model's step with
// a shortlist against its step without one, renormalised over the same tokens (log-softmax is shift-invariant, so
// log_softmax(logp_full[r, vocab]) is the row's shortlist distribution), for every output-layer kind: dense,
// tied, with a bias, packed fp32 and int8, and the RNN.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <limits>
#include <random>
#include <set>

#include <torch/torch.h>

#include "models/factory.h"
#include "models/int8_quantization.h"
#include "models/output_shortlist.h"
#include "models/packed_fp32.h"
#include "models/decoding_kind.h"
#include "models/tiny_config.h"
#include "models/transformer.h"

using namespace parla;
using namespace parla::models;

namespace {

// `sentences` random vocabularies over [0, vocab), each of 1..vocab tokens, and `rows` rows spread over them.
OutputShortlist random_shortlist(int sentences, int rows, int64_t vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int64_t>> by_id;
  for (int s = 0; s < sentences; ++s) {
    std::vector<int64_t> v;
    for (int64_t t = 0; t < vocab; ++t)
      if (rng() % 3 == 0 || t == kEosId) v.push_back(t);
    by_id.push_back(v);
  }
  OutputShortlist out;
  out.set_vocabularies(by_id, vocab);
  for (int r = 0; r < rows; ++r) out.row_vocabulary.push_back(static_cast<int32_t>(rng() % sentences));
  return out;
}

std::vector<int64_t> ids_of(const OutputShortlist& s, int32_t sentence) {
  std::vector<int64_t> out;
  auto cols = s.columns.accessor<int64_t, 1>();
  for (int32_t p : s.vocabularies[sentence]) out.push_back(cols[p]);
  return out;
}

// Row r of `logp` [N, V] against log_softmax(reference[r, its vocabulary]) and -inf elsewhere.
void check_rows(const torch::Tensor& logp, const torch::Tensor& reference, const OutputShortlist& s, double tol) {
  const int64_t V = reference.size(1);
  REQUIRE(logp.sizes() == reference.sizes());
  for (int64_t r = 0; r < logp.size(0); ++r) {
    auto ids = torch::tensor(ids_of(s, s.row_vocabulary[r]), torch::kLong);
    auto expected = torch::log_softmax(reference[r].index_select(0, ids).to(torch::kDouble), 0);
    auto got = logp[r].index_select(0, ids).to(torch::kDouble);
    INFO("row " << r << ": largest difference " << (got - expected).abs().max().item<double>());
    CHECK(torch::allclose(got, expected, tol, tol));
    auto outside = torch::ones({V}, torch::kBool).index_fill_(0, ids, false);
    auto rest = logp[r].masked_select(outside);
    CHECK(rest.numel() == V - ids.numel());
    if (rest.numel() > 0) CHECK(rest.isinf().all().item<bool>());
    if (rest.numel() > 0) CHECK((rest < 0).all().item<bool>());
  }
}

std::shared_ptr<Seq2SeqModel> tiny(ModelConfig cfg, int64_t vocab, uint64_t seed) {
  torch::manual_seed(seed);
  cfg.dropout = 0;
  auto m = build_seq2seq(cfg, vocab, vocab);
  m->eval();
  return m;
}

// Log-probs of the first two decoder steps of `model` on a random batch, with and without `s`.
std::pair<torch::Tensor, torch::Tensor> two_steps(Seq2SeqModel& model, const OutputShortlist& s, int64_t rows) {
  torch::NoGradGuard g;
  auto src = torch::randint(4, model.vocab_size(), {rows, 6}, torch::kLong);
  src.select(1, 5).fill_(kEosId);
  auto prev = torch::full({rows}, model.start_id(), torch::kLong);
  auto full_state = model.start(src), short_state = model.start(src);
  short_state->shortlist = &s;
  torch::Tensor full, restricted;
  for (int step = 0; step < 2; ++step) {
    full = model.step(prev, *full_state);
    restricted = model.step(prev, *short_state);
    prev = full.argmax(-1);
  }
  return {full, restricted};
}

}  // namespace

TEST_CASE("shortlist log-softmax: each row over its own vocabulary as the formula, -inf elsewhere", "[shortlist]") {
  for (unsigned seed : {1u, 2u, 3u}) {
    const int64_t V = 37;
    auto s = random_shortlist(4, 9, V, seed);
    auto full = torch::randn({9, V}) * 4;
    auto logits = full.index_select(1, s.columns).contiguous();
    auto logp = shortlist_log_softmax(logits, s, V);
    check_rows(logp, full, s, 1e-6);
    // The union's other columns do not change a row: the same row with a one-sentence shortlist gives the same bits.
    for (int64_t r = 0; r < 9; ++r) {
      OutputShortlist alone;
      alone.set_vocabularies({ids_of(s, s.row_vocabulary[r])}, V);
      alone.row_vocabulary = {0};
      auto single = shortlist_log_softmax(full[r].index_select(0, alone.columns).unsqueeze(0), alone, V);
      CHECK(torch::equal(single[0], logp[r]));
    }
  }
}

TEST_CASE("shortlist columns: the union of the vocabularies, filled up with other ids to one of few widths",
          "[shortlist]") {
  // padded_width against its definition: a multiple of max(256, (largest power of two <= width) / 8), at most the
  // vocabulary.
  for (int64_t width : {1, 255, 256, 257, 1000, 1025, 3000, 4095, 4096, 4097, 40000}) {
    int64_t octave = 1;
    for (int64_t p = 1; p <= width; p *= 2) octave = p;
    const int64_t step = std::max<int64_t>(256, octave / 8), want = (width + step - 1) / step * step;
    INFO("width " << width);
    CHECK(padded_width(width, 1 << 20) == want);
    CHECK(padded_width(width, 1 << 20) < width + width / 8 + 256);
    CHECK(padded_width(width, width + 3) == std::min(want, width + 3));
  }
  std::set<int64_t> distinct;
  for (int64_t width = 1; width <= 8000; ++width) distinct.insert(padded_width(width, 8000));
  CHECK(distinct.size() <= 8 * 5 + 1);  // 8 per octave above 2048, 256-steps below

  const int64_t V = 5000;
  OutputShortlist s;
  s.set_vocabularies({{3, 17, 4999}, {3, 1000, 1001}, {}}, V);
  const auto cols = s.columns;
  REQUIRE(cols.size(0) == 256);
  CHECK(torch::equal(std::get<0>(cols.sort()), cols));               // sorted
  CHECK(std::get<0>(torch::_unique(cols)).size(0) == cols.size(0));  // distinct
  CHECK(cols.max().item<int64_t>() == 4999);
  CHECK(ids_of(s, 0) == std::vector<int64_t>{3, 17, 4999});
  CHECK(ids_of(s, 1) == std::vector<int64_t>{3, 1000, 1001});
  CHECK(s.vocabularies[2].empty());
  const auto before = s.version;
  s.set_vocabularies({{3}}, 10);
  CHECK(s.version == before + 1);
  CHECK(s.columns.size(0) == 10);  // filled up to the whole (small) vocabulary
  CHECK_THROWS(s.set_vocabularies({{10}}, 10));
}

TEST_CASE("shortlist log-softmax refuses logits of the wrong shape", "[shortlist]") {
  auto s = random_shortlist(2, 3, 10, 4);
  CHECK_THROWS(shortlist_log_softmax(torch::zeros({3, s.columns.size(0) + 1}), s, 10));
  CHECK_THROWS(shortlist_log_softmax(torch::zeros({2, s.columns.size(0)}), s, 10));
}

TEST_CASE("a Transformer's step with a shortlist is its full step renormalised over each row's vocabulary",
          "[shortlist]") {
  const int64_t V = 700;
  struct Variant {
    const char* name;
    bool tie, bias, pack, int8;
  };
  const Variant variants[] = {{"dense untied", false, false, false, false}, {"dense tied + bias", true, true, false, false},
                              {"packed untied + bias", false, true, true, false}, {"packed tied", true, false, true, false},
                              {"int8 untied", false, false, false, true},   {"int8 tied + bias", true, true, false, true}};
  for (const auto& v : variants) {
    SECTION(v.name) {
      auto cfg = parla::testing::tiny_transformer();
      cfg.tie_output = v.tie;
      cfg.output_bias = v.bias;
      auto model = tiny(cfg, V, 11);
      if (v.bias) {
        torch::NoGradGuard g;
        dynamic_cast<TransformerModel&>(*model).output_bias.normal_();
      }
      if (v.pack) parla::testing::pack_fp32_forced(*model);
      if (v.int8) quantize_int8(*model);
      auto s = random_shortlist(3, 6, V, 7);
      auto [full, restricted] = two_steps(*model, s, 6);
      // Both go through the same kernels; only the softmax's sum differs in order.
      check_rows(restricted, full, s, 2e-5);
    }
  }
}

TEST_CASE("an RNN's step with a shortlist is its full step renormalised over each row's vocabulary", "[shortlist]") {
  const int64_t V = 40;
  auto model = tiny(parla::testing::tiny_rnn(), V, 12);
  REQUIRE(model->supports_shortlist());
  auto s = random_shortlist(2, 4, V, 9);
  auto [full, restricted] = two_steps(*model, s, 4);
  check_rows(restricted, full, s, 2e-5);
}

TEST_CASE("a Transformer re-slices its output projection when the shortlist's columns change", "[shortlist]") {
  const int64_t V = 600;
  auto model = tiny(parla::testing::tiny_transformer(), V, 13);
  torch::NoGradGuard g;
  auto src = torch::randint(4, V, {2, 5}, torch::kLong);
  src.select(1, 4).fill_(kEosId);
  auto prev = torch::full({2}, kBosId, torch::kLong);
  auto full_state = model->start(src), short_state = model->start(src);
  OutputShortlist s;
  s.set_vocabularies({{kEosId, 5, 6, 7}, {kEosId, 8, 9}}, V);
  s.row_vocabulary = {0, 1};
  short_state->shortlist = &s;
  check_rows(model->step(prev, *short_state), model->step(prev, *full_state), s, 2e-5);
  s.set_vocabularies({{kEosId, 10, 20, 299, 599}, {kEosId, 4, 11, 12, 598}}, V);  // new columns, same object
  REQUIRE(s.columns.size(0) == 256);
  auto restricted = model->step(prev, *short_state);
  check_rows(restricted, model->step(prev, *full_state), s, 2e-5);
}

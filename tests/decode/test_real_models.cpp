// Search with real (tiny, randomly initialised) Transformer and RNN models: untrained is enough for equality
// properties, which must hold for any weights.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "decode/beam_search.h"
#include "decode/ensemble.h"
#include "decode/greedy_search.h"
#include "decode/search.h"
#include "models/factory.h"
#include "models/tiny_config.h"
#include "toy_model.h"

using namespace parla;
using namespace parla::decode;
using parla::decode::testing::make_source;

namespace {

std::vector<std::vector<int64_t>> random_sources(int n, int64_t vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int64_t>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> s(1 + rng() % 12);
    for (auto& t : s) t = 4 + static_cast<int64_t>(rng() % (vocab - 4));
    out.push_back(s);
  }
  return out;
}

std::vector<std::shared_ptr<models::Seq2SeqModel>> tiny_models() {
  torch::manual_seed(3);
  std::vector<std::shared_ptr<models::Seq2SeqModel>> out;
  for (auto cfg : {parla::testing::tiny_transformer(), parla::testing::tiny_rnn()}) {
    cfg.dropout = 0;
    auto m = models::build_seq2seq(cfg, 40, 40);
    m->eval();
    out.push_back(m);
  }
  return out;
}

SearchOptions opts(int beam) {
  SearchOptions o;
  o.beam_size = beam;
  o.n_best = 1;
  o.max_length_factor = 1.5;
  o.max_length_offset = 3;
  return o;
}

}  // namespace

TEST_CASE("real models: a batch of many sentences gives the same outputs as one sentence at a time",
          "[real_models]") {
  auto sources = random_sources(24, 40, 1);
  for (auto& model : tiny_models()) {
    for (int beam : {1, 4}) {
      auto batched = search(*model, make_source(sources), opts(beam));
      for (size_t i = 0; i < sources.size(); ++i) {
        auto single = search(*model, make_source({sources[i]}), opts(beam));
        INFO("beam " << beam << " sentence " << i);
        CHECK(single[0][0].tokens == batched[i][0].tokens);
        CHECK(single[0][0].score == Approx(batched[i][0].score).epsilon(1e-4));
      }
    }
  }
}

TEST_CASE("real models: beam 1 equals greedy search", "[real_models]") {
  auto sources = random_sources(12, 40, 2);
  for (auto& model : tiny_models()) {
    auto greedy = greedy_search(*model, make_source(sources), opts(1));
    auto beam = beam_search(*model, make_source(sources), opts(1));
    for (size_t i = 0; i < sources.size(); ++i) {
      CHECK(greedy[i][0].tokens == beam[i][0].tokens);
      CHECK(greedy[i][0].score == Approx(beam[i][0].score).epsilon(1e-5));
    }
  }
}

TEST_CASE("real models: an ensemble of one checkpoint twice equals that checkpoint", "[real_models]") {
  auto sources = random_sources(8, 40, 3);
  for (auto& model : tiny_models()) {
    Ensemble twice({model, model});
    auto a = search(*model, make_source(sources), opts(3));
    auto b = search(twice, make_source(sources), opts(3));
    for (size_t i = 0; i < sources.size(); ++i) {
      CHECK(a[i][0].tokens == b[i][0].tokens);
      CHECK(a[i][0].score == Approx(b[i][0].score).epsilon(1e-5));
    }
  }
}

TEST_CASE("real models: cached greedy decoding equals re-running the full prefix every step", "[real_models]") {
  // The naive reference: no incremental state, forward(src, prefix) on the whole prefix at every step.
  auto sources = random_sources(5, 40, 4);
  for (auto& model : tiny_models()) {
    auto cached = greedy_search(*model, make_source(sources), opts(1));
    torch::NoGradGuard g;
    for (size_t i = 0; i < sources.size(); ++i) {
      auto src = make_source({sources[i]});
      std::vector<int64_t> prefix{models::kBosId};
      const size_t limit = static_cast<size_t>(1.5 * static_cast<double>(sources[i].size()) + 3);
      for (size_t t = 0; t <= limit; ++t) {
        auto logits = model->forward(src, torch::tensor(prefix, torch::kLong).unsqueeze(0));
        auto logp = torch::log_softmax(logits[0][-1], -1);
        logp[models::kPadId] = -INFINITY;
        logp[models::kBosId] = -INFINITY;
        int64_t tok = t == limit ? models::kEosId : logp.argmax().item<int64_t>();
        if (tok == models::kEosId) break;
        prefix.push_back(tok);
      }
      CHECK(std::vector<int64_t>(prefix.begin() + 1, prefix.end()) == cached[i][0].tokens);
    }
  }
}

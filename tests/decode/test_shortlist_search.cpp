// Searches with a lexical shortlist (SearchOptions::shortlist): every output token lies in its sentence's
// vocabulary; a sentence gets the same result alone, in a batch, and joining a running search (its vocabulary is
// its own, whatever the batch's union); a shortlist that covers what the full-vocabulary greedy search outputs
// changes nothing; ensembles and every search kind honour it; a model that cannot restrict its output is refused.
#include <catch2/catch.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <random>

#include "core/error.h"
#include "decode/beam_search.h"
#include "decode/ensemble.h"
#include "decode/lexical_shortlist.h"
#include "decode/sampling.h"
#include "decode/search.h"
#include "decode/search_shortlist.h"
#include "models/factory.h"
#include "models/int8_quantization.h"
#include "models/packed_fp32.h"
#include "models/tiny_config.h"
#include "support/scoped_runtime.h"
#include "toy_model.h"

using namespace parla;
using namespace parla::decode;
using parla::decode::testing::make_source;
using parla::decode::testing::random_sources;

namespace {

constexpr int64_t kVocab = 60;

std::shared_ptr<models::Seq2SeqModel> tiny_transformer(uint64_t seed, const std::string& kind) {
  torch::manual_seed(seed);
  auto cfg = parla::testing::tiny_transformer();
  cfg.dropout = 0;
  auto m = models::build_seq2seq(cfg, kVocab, kVocab);
  {
    // Larger weights than the initialisation's: peaked distributions, outputs that end before the length limit.
    torch::NoGradGuard g;
    for (auto& p : m->parameters()) p.mul_(3);
  }
  m->eval();
  if (kind == "packed") {
    parla::testing::ScopedRuntime on([](parla::RuntimeConfig& rc) { rc.packed_fp32 = parla::PackedFp32::kOn; });
    models::pack_fp32(*m);
  }
  if (kind == "int8") models::quantize_int8(*m);
  return m;
}

// A shortlist over random co-occurrences of the toy id space: each source id gets a few random targets.
std::shared_ptr<const LexicalShortlist> random_shortlist(unsigned seed) {
  std::mt19937 rng(seed);
  LexicalShortlist::Builder b;
  for (int i = 0; i < 300; ++i) {
    std::vector<int> s(1 + rng() % 4), t(1 + rng() % 4);
    for (auto& x : s) x = 4 + static_cast<int>(rng() % (kVocab - 4));
    for (auto& y : t) y = 4 + static_cast<int>(rng() % (kVocab - 4));
    b.add(s, t);
  }
  ShortlistOptions o;
  o.best = 4;
  o.frequent = 5;
  return std::make_shared<const LexicalShortlist>(b.build(o));
}

SearchOptions options(int beam, int n_best, std::shared_ptr<const LexicalShortlist> sl) {
  SearchOptions o;
  o.beam_size = beam;
  o.n_best = n_best;
  o.max_length_factor = 1.5;
  o.max_length_offset = 4;
  o.shortlist = std::move(sl);
  return o;
}

void check_in_vocabulary(const std::vector<NBestList>& out, const std::vector<std::vector<int64_t>>& sources,
                         const LexicalShortlist& sl) {
  for (size_t i = 0; i < out.size(); ++i) {
    const auto vocab = sl.candidates(sources[i].data(), static_cast<int64_t>(sources[i].size()));
    for (const auto& h : out[i])
      for (int64_t t : h.tokens) {
        INFO("sentence " << i << " token " << t);
        CHECK(std::binary_search(vocab.begin(), vocab.end(), t));
      }
  }
}

}  // namespace

TEST_CASE("shortlist search: outputs stay in each sentence's vocabulary and a batch gives each sentence's result "
          "alone, dense, packed fp32 and int8", "[shortlist]") {
  const auto sentences = random_sources(16, kVocab, 3, 10);
  const auto src = make_source(sentences);
  const auto sl = random_shortlist(5);
  for (std::string kind : {"dense", "packed", "int8"}) {
    auto model = tiny_transformer(9, kind);
    for (auto [beam, n_best] : {std::pair{1, 1}, std::pair{5, 1}, std::pair{4, 3}}) {
      const auto o = options(beam, n_best, sl);
      const auto batch = search(*model, src, o);
      check_in_vocabulary(batch, sentences, *sl);
      bool differs_from_full = false;
      const auto full = search(*model, src, options(beam, n_best, nullptr));
      for (size_t i = 0; i < sentences.size(); ++i) {
        const auto alone = search(*model, make_source({sentences[i]}), o)[0];
        INFO(kind << ", beam " << beam << ", sentence " << i);
        REQUIRE(batch[i].size() == alone.size());
        for (size_t k = 0; k < alone.size(); ++k) {
          // Tokens exactly; scores up to the rounding a batch's padding brings to the encoder (the tolerance of the
          // batch test without a shortlist, test_real_models.cpp).
          CHECK(batch[i][k].tokens == alone[k].tokens);
          CHECK(batch[i][k].score == Approx(alone[k].score).epsilon(1e-4));
        }
        differs_from_full = differs_from_full || batch[i][0].tokens != full[i][0].tokens;
      }
      CHECK(differs_from_full);  // the shortlist really restricted something
    }
  }
}

TEST_CASE("shortlist search: a shortlist covering the full-vocabulary greedy output leaves greedy search unchanged",
          "[shortlist]") {
  const auto sentences = random_sources(12, kVocab, 8, 10);
  const auto src = make_source(sentences);
  for (std::string kind : {"dense", "int8"}) {
    auto model = tiny_transformer(10, kind);
    const auto full = search(*model, src, options(1, 1, nullptr));
    // Every source piece of a sentence allows every piece of that sentence's own output, and no more.
    LexicalShortlist::Builder b;
    for (size_t i = 0; i < sentences.size(); ++i) {
      std::vector<int> s(sentences[i].begin(), sentences[i].end()), t(full[i][0].tokens.begin(), full[i][0].tokens.end());
      b.add(s, t);
    }
    ShortlistOptions so;
    so.best = 1000;
    so.frequent = 0;
    auto sl = std::make_shared<const LexicalShortlist>(b.build(so));
    const auto restricted = search(*model, src, options(1, 1, sl));
    bool smaller = false;
    for (size_t i = 0; i < sentences.size(); ++i) {
      INFO(kind << ", sentence " << i);
      CHECK(restricted[i][0].tokens == full[i][0].tokens);
      // Renormalised over fewer tokens, the log-probability can only rise.
      CHECK(restricted[i][0].log_prob >= full[i][0].log_prob - 1e-4f);
      smaller = smaller || sl->candidates(sentences[i].data(), static_cast<int64_t>(sentences[i].size())).size() <
                               static_cast<size_t>(kVocab) / 2;
    }
    CHECK(smaller);
  }
}

TEST_CASE("shortlist search: sentences joining a running beam search get their results alone", "[shortlist]") {
  const auto sentences = random_sources(20, kVocab, 12, 9);
  const auto sl = random_shortlist(6);
  auto model = tiny_transformer(13, "int8");
  const auto o = options(3, 2, sl);
  BeamSearch running(*model, o);
  std::map<int64_t, NBestList> got;
  size_t next = 0;
  std::mt19937 rng(4);
  while (next < sentences.size() || running.size() > 0) {
    const size_t count = std::min<size_t>(sentences.size() - next, rng() % 3);
    if (count > 0 || running.size() == 0) {
      const size_t n = std::max<size_t>(count, std::min<size_t>(1, sentences.size() - next));
      if (n > 0) {
        std::vector<std::vector<int64_t>> group(sentences.begin() + next, sentences.begin() + next + n);
        std::vector<int64_t> ids;
        for (size_t i = 0; i < n; ++i) ids.push_back(static_cast<int64_t>(next + i));
        running.add(make_source(group), ids);
        next += n;
      }
    }
    for (auto& [id, best] : running.step()) got[id] = std::move(best);
  }
  REQUIRE(got.size() == sentences.size());
  for (size_t i = 0; i < sentences.size(); ++i) {
    const auto alone = beam_search(*model, make_source({sentences[i]}), o)[0];
    INFO("sentence " << i);
    REQUIRE(got[static_cast<int64_t>(i)].size() == alone.size());
    for (size_t k = 0; k < alone.size(); ++k) {
      CHECK(got[static_cast<int64_t>(i)][k].tokens == alone[k].tokens);
      CHECK(got[static_cast<int64_t>(i)][k].score == Approx(alone[k].score).epsilon(1e-4));
    }
  }
}

TEST_CASE("shortlist search: an ensemble of a model with itself, sampling, and models that cannot restrict",
          "[shortlist]") {
  const auto sentences = random_sources(8, kVocab, 14, 8);
  const auto src = make_source(sentences);
  const auto sl = random_shortlist(7);
  auto model = tiny_transformer(15, "dense");
  auto twice = std::make_shared<Ensemble>(std::vector<std::shared_ptr<models::Seq2SeqModel>>{model, model});
  const auto o = options(4, 1, sl);
  const auto one = search(*model, src, o), two = search(*twice, src, o);
  for (size_t i = 0; i < sentences.size(); ++i) CHECK(two[i][0].tokens == one[i][0].tokens);

  auto so = options(1, 1, sl);
  so.sampling = true;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const auto sampled = search(*model, src, so, &gen);
  check_in_vocabulary(sampled, sentences, *sl);

  parla::decode::testing::ToyModel toy(kVocab, 1);
  CHECK_THROWS_AS(search(toy, src, o), UsageError);
  CHECK_THROWS_AS(search(toy, src, options(1, 1, sl)), UsageError);
}

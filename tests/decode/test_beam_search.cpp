// Beam search, greedy search and sampling against the toy model, whose scores are known in closed form: the
// references here are brute-force enumeration and one-sentence-at-a-time search, never the search's own output.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <cstring>
#include <random>
#include <set>

#include <catch2/catch.hpp>

#include <ATen/CPUGeneratorImpl.h>

#include "decode/beam_search.h"
#include "decode/greedy_search.h"
#include "decode/length_penalty.h"
#include "decode/sampling.h"
#include "decode/search.h"
#include "decode/step_constraints.h"
#include "models/decoding_kind.h"
#include "models/factory.h"
#include "models/tiny_config.h"
#include "models/transformer.h"
#include "same_lists.h"
#include "toy_model.h"

using namespace parla;
using namespace parla::decode;
using namespace parla::decode::testing;

namespace {

SearchOptions options(int beam, double alpha = 0.6) {
  SearchOptions o;
  o.beam_size = beam;
  o.n_best = 1;
  o.length_penalty = alpha;
  return o;
}

std::vector<std::vector<int64_t>> sources() {
  return {{4, 5, 6}, {7}, {8, 9, 10, 11, 4, 5}, {6, 6}, {11, 10, 9, 8, 7, 6, 5, 4, 5, 6}, {9, 4}};
}

struct Scored {
  std::vector<int64_t> tokens;
  double score;
};

// Every output of at most max_len tokens over the non-special ids (UNK and up), with EOS forbidden before
// min_len and forced at max_len, scored with the toy model in double precision.
std::vector<Scored> enumerate(const std::vector<int64_t>& source, int64_t vocab, uint64_t seed, double bias,
                              int64_t max_len, int64_t min_len, double alpha) {
  std::vector<Scored> all;
  std::vector<int64_t> prefix, src = source;
  src.push_back(parla::kEosId);  // the model sees the source with its EOS
  std::function<void(double)> rec = [&](double logp) {
    auto lp = toy_log_probs(src, prefix, vocab, seed, bias);
    int64_t len = static_cast<int64_t>(prefix.size());
    if (len >= min_len || len >= max_len)
      all.push_back({prefix, (logp + lp[parla::kEosId]) / length_penalty(len + 1, alpha)});
    if (len >= max_len) return;
    for (int64_t v = 0; v < vocab; ++v) {
      if (v == parla::kPadId || v == parla::kBosId || v == parla::kEosId) continue;
      prefix.push_back(v);
      rec(logp + lp[v]);
      prefix.pop_back();
    }
  };
  rec(0.0);
  std::sort(all.begin(), all.end(), [](const Scored& a, const Scored& b) { return a.score > b.score; });
  return all;
}

}  // namespace

TEST_CASE("beam search with beam 1 returns exactly what greedy search returns", "[beam_search]") {
  ToyModel model(40, 11, 0.3);
  auto src = make_source(sources());
  for (double alpha : {0.0, 0.6, 1.0}) {
    auto beam = beam_search(model, src, options(1, alpha));
    auto greedy = greedy_search(model, src, options(1, alpha));
    REQUIRE(beam.size() == greedy.size());
    for (size_t i = 0; i < beam.size(); ++i) {
      REQUIRE(beam[i].size() == 1);
      REQUIRE(greedy[i].size() == 1);
      CHECK(beam[i][0].tokens == greedy[i][0].tokens);
      CHECK(beam[i][0].score == greedy[i][0].score);
    }
  }
}

TEST_CASE("greedy search picks the argmax token at every step", "[greedy]") {
  ToyModel model(30, 5, 0.4);
  std::vector<int64_t> source{4, 5, 6};
  auto out = greedy_search(model, make_source({source}), options(1, 0.0));
  // Reference: argmax of the closed-form distribution, prefix by prefix.
  std::vector<int64_t> prefix;
  double logp = 0;
  for (int guard = 0; guard < 100; ++guard) {
    auto lp = toy_log_probs({4, 5, 6, parla::kEosId}, prefix, 30, 5, 0.4);
    int64_t best = -1;
    for (int64_t v = 0; v < 30; ++v) {
      if (v == parla::kPadId || v == parla::kBosId) continue;
      if (best < 0 || lp[v] > lp[best]) best = v;
    }
    logp += lp[best];
    if (best == parla::kEosId) break;
    prefix.push_back(best);
  }
  CHECK(out[0][0].tokens == prefix);
  CHECK(out[0][0].score == Approx(logp).epsilon(1e-5));
}

TEST_CASE("a wide beam finds the best-scoring output of exhaustive enumeration", "[beam_search]") {
  // Vocabulary: 4 specials + 3 words (UNK counts as a word), at most 4 tokens: 121 outputs. A beam of 128 can hold
  // every prefix, so the search is exact and must agree with enumeration, for several length penalties.
  const int64_t vocab = 6;
  for (uint64_t seed : {1u, 2u, 3u, 4u}) {
    for (double alpha : {0.0, 0.6, 2.0}) {
      ToyModel model(vocab, seed, 0.2);
      SearchOptions o = options(128, alpha);
      o.max_length_factor = 1;
      o.max_length_offset = 2;  // source of 2 tokens -> at most 4 output tokens
      o.n_best = 5;
      std::vector<int64_t> source{4, 5};
      auto ref = enumerate(source, vocab, seed, 0.2, 4, 0, alpha);
      auto got = beam_search(model, make_source({source}), o);
      REQUIRE(got[0].size() == 5);
      for (size_t k = 0; k < 5; ++k) {
        INFO("seed " << seed << " alpha " << alpha << " rank " << k);
        CHECK(got[0][k].tokens == ref[k].tokens);
        CHECK(got[0][k].score == Approx(ref[k].score).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("a narrow beam never beats the exhaustive optimum and its score is the true score", "[beam_search]") {
  const int64_t vocab = 7;
  ToyModel model(vocab, 9, 0.2);
  SearchOptions o = options(3, 0.6);
  o.max_length_factor = 1;
  o.max_length_offset = 2;
  std::vector<int64_t> source{4, 6, 5};
  auto ref = enumerate(source, vocab, 9, 0.2, 5, 0, 0.6);
  auto got = beam_search(model, make_source({source}), o);
  REQUIRE(got[0].size() == 1);
  CHECK(got[0][0].score <= ref[0].score + 1e-5);
  auto it = std::find_if(ref.begin(), ref.end(), [&](const Scored& s) { return s.tokens == got[0][0].tokens; });
  REQUIRE(it != ref.end());
  CHECK(got[0][0].score == Approx(it->score).epsilon(1e-5));
}

TEST_CASE("n-best lists are sorted by score and hold distinct outputs", "[beam_search]") {
  ToyModel model(25, 3, 0.3);
  SearchOptions o = options(8, 0.6);
  o.n_best = 8;
  auto out = beam_search(model, make_source(sources()), o);
  for (auto& list : out) {
    REQUIRE(list.size() == 8);
    std::set<std::vector<int64_t>> seen;
    for (size_t k = 0; k < list.size(); ++k) {
      if (k > 0) CHECK(list[k - 1].score >= list[k].score);
      CHECK(seen.insert(list[k].tokens).second);
    }
  }
}

TEST_CASE("batched search returns the same outputs as one sentence at a time", "[beam_search]") {
  ToyModel model(50, 21, 0.3);
  auto src = sources();
  for (int beam : {1, 4}) {
    SearchOptions o = options(beam);
    o.n_best = beam;
    auto batched = search(model, make_source(src), o);
    for (size_t i = 0; i < src.size(); ++i) {
      auto single = search(model, make_source({src[i]}), o);
      REQUIRE(single[0].size() == batched[i].size());
      for (size_t k = 0; k < single[0].size(); ++k) {
        CHECK(single[0][k].tokens == batched[i][k].tokens);
        CHECK(single[0][k].score == batched[i][k].score);
      }
    }
  }
}

TEST_CASE("outputs respect the minimum and maximum lengths", "[beam_search]") {
  ToyModel model(20, 4, 2.0);  // a strong EOS bias: unconstrained outputs are short
  auto src = make_source(sources());
  auto lengths = source_lengths(src);
  for (int beam : {1, 3}) {
    SearchOptions o = options(beam);
    o.min_length = 5;
    for (auto& list : search(model, src, o)) CHECK(list[0].tokens.size() >= 5);
  }
  ToyModel chatty(20, 4, -5.0);  // EOS almost never chosen: the limit must end every output exactly there
  for (int beam : {1, 3}) {
    SearchOptions o = options(beam);
    o.max_length_factor = 1.5;
    o.max_length_offset = 1;
    o.min_length = 1;
    auto out = search(chatty, src, o);
    for (size_t i = 0; i < out.size(); ++i)
      CHECK(static_cast<int64_t>(out[i][0].tokens.size()) ==
            static_cast<int64_t>(std::floor(1.5 * static_cast<double>(lengths[i]) + 1)));
  }
}

TEST_CASE("the output limit is a*n+b, capped by the model's positions, and at least one token", "[search]") {
  SearchOptions o;
  o.max_length_factor = 3;
  o.max_length_offset = 10;
  CHECK(max_output_length(o, 20, INT64_MAX) == 70);
  CHECK(max_output_length(o, 20, 64) == 63);
  o.max_length_factor = 0.5;
  o.max_length_offset = 0;
  CHECK(max_output_length(o, 1, INT64_MAX) == 1);
}

TEST_CASE("finished sentences leave the batch", "[beam_search]") {
  // One sentence that ends at once (strong EOS after 1 token) next to one forced to run 30 steps: once the
  // short one is done, only the long one's rows are stepped.
  ToyModel model(20, 8, -5.0);
  SearchOptions o = options(2, 0.0);
  o.max_length_factor = 1;
  o.max_length_offset = 0;
  o.min_length = 1;
  auto src = make_source({{4}, std::vector<int64_t>(30, 5)});
  auto out = beam_search(model, src, o);
  CHECK(out[0][0].tokens.size() == 1);
  CHECK(out[1][0].tokens.size() == 30);
  // One decoder row per sentence at the first step, then 2 rows: the short sentence stops after its second step,
  // the long one after its 31st.
  CHECK(model.rows_stepped == 2 * 1 + 2 + 2 * 30);
}

TEST_CASE("search keeps attention per target token when asked", "[beam_search]") {
  ToyModel model(20, 6, 0.5);
  SearchOptions o = options(3);
  o.attention = true;
  auto src = make_source({{4, 5, 6, 7}, {8}});
  for (int beam : {1, 3}) {
    o.beam_size = beam;
    auto out = search(model, src, o);
    for (size_t i = 0; i < out.size(); ++i) {
      const auto& h = out[i][0];
      REQUIRE(h.attention.size() == h.tokens.size() + 1);
      size_t width = i == 0 ? 5 : 2;
      for (size_t t = 0; t < h.attention.size(); ++t) {
        REQUIRE(h.attention[t].size() == width);
        // The toy attends to position t mod source width.
        CHECK(h.attention[t][t % width] == 1.0f);
      }
    }
  }
}

TEST_CASE("sampling is reproducible with a seed and follows top-k", "[sampling]") {
  ToyModel model(30, 12, 0.3);
  SearchOptions o = options(1);
  o.sampling = true;
  o.top_k = 1;  // top-1 sampling is greedy search
  auto src = make_source(sources());
  auto gen = make_generator(1);
  auto sampled = search(model, src, o, &gen);
  auto greedy = greedy_search(model, src, options(1));
  for (size_t i = 0; i < sampled.size(); ++i) CHECK(sampled[i][0].tokens == greedy[i][0].tokens);

  o.top_k = 0;
  o.temperature = 2.0;
  auto g1 = make_generator(7), g2 = make_generator(7);
  auto a = search(model, src, o, &g1), b = search(model, src, o, &g2);
  bool differs_from_greedy = false;
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i][0].tokens == b[i][0].tokens);
    differs_from_greedy |= a[i][0].tokens != greedy[i][0].tokens;
  }
  CHECK(differs_from_greedy);
}

TEST_CASE("sampling with n-best N draws N samples per sentence, listed best score first", "[sampling]") {
  ToyModel model(30, 12, 0.3);
  SearchOptions o = options(4);
  o.sampling = true;
  o.n_best = 4;
  o.temperature = 2.0;
  auto src = make_source(sources());
  auto gen = make_generator(3);
  auto lists = search(model, src, o, &gen);
  REQUIRE(lists.size() == static_cast<size_t>(src.size(0)));
  bool some_sentence_has_distinct_samples = false;
  for (const auto& list : lists) {
    REQUIRE(list.size() == 4);
    for (size_t k = 1; k < list.size(); ++k) CHECK(list[k - 1].score >= list[k].score);
    for (size_t k = 1; k < list.size(); ++k) some_sentence_has_distinct_samples |= list[k].tokens != list[0].tokens;
  }
  CHECK(some_sentence_has_distinct_samples);

  // With top-1 every sample is the greedy output.
  o.top_k = 1;
  auto greedy = greedy_search(model, src, options(1));
  auto g = make_generator(3);
  auto top1 = search(model, src, o, &g);
  for (size_t i = 0; i < top1.size(); ++i)
    for (const auto& h : top1[i]) CHECK(h.tokens == greedy[i][0].tokens);
}

TEST_CASE("sampling on the CPU draws exactly what a CPU generator with the same seed draws", "[sampling]") {
  // Reference: LibTorch's own CPU generator, created directly, drives the same multinomial draws by hand.
  ToyModel model(30, 12, 0.3);
  SearchOptions o = options(1);
  o.sampling = true;
  o.temperature = 2.0;
  auto src = make_source(sources());
  auto mine = make_generator(9, torch::kCPU);
  CHECK(mine.device().is_cpu());
  auto theirs = at::detail::createCPUGenerator(9);
  auto a = torch::rand({16}, mine), b = torch::rand({16}, theirs);
  CHECK(torch::equal(a, b));
  auto g1 = make_generator(9), g2 = make_generator(9, torch::kCPU);
  auto x = search(model, src, o, &g1), y = search(model, src, o, &g2);
  for (size_t i = 0; i < x.size(); ++i) CHECK(x[i][0].tokens == y[i][0].tokens);
}

TEST_CASE("beam search with the tensor-op candidate selection returns the scan's n-best lists bit for bit",
          "[beam_search]") {
  // 64 random sources of 1-12 tokens, searched as one batch and one at a time, with both selections.
  const auto src = random_sources(64, 30, 5);
  for (int beam : {2, 5}) {
    ToyModel model(30, 17 + beam, 0.2);
    SearchOptions scan = options(beam), tensor = options(beam);
    scan.n_best = tensor.n_best = beam;
    scan.max_length_offset = tensor.max_length_offset = 4;
    tensor.device_candidates = true;
    auto want = beam_search(model, make_source(src), scan);
    auto got = beam_search(model, make_source(src), tensor);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < src.size(); ++i) {
      INFO("beam " << beam << " sentence " << i);
      same_lists(got[i], want[i]);
      if (i % 8 == 0) same_lists(beam_search(model, make_source({src[i]}), tensor)[0], want[i]);
    }
  }
}

TEST_CASE("a Transformer's beam search from the logits returns the n-best lists of its log-probability steps, bit "
          "for bit",
          "[beam_search]") {
  // Without alignments, on the CPU, beam search reads the logits and a log-sum-exp per row (the fast path); with
  // alignments it reads the model's written-out log-probabilities. Both must agree to the bit, at the length limit
  // (rows whose EOS is forced keep its log-probability), under a minimum length, in one batch and one at a time.
  // The output layer three ways: tied, tied with an output bias (OPUS-MT's), untied with a bias; the fast path
  // writes the packed and int8 products into the state's buffer (models/transformer.h), the slow one returns new
  // tensors.
  for (int output : {0, 1, 2})
  for (std::string kind : {"fp32", "packed", "int8"}) {
    auto cfg = parla::testing::tiny_transformer();
    cfg.dropout = 0;
    cfg.output_bias = output > 0;
    cfg.tie_output = output < 2;
    torch::manual_seed(6);
    auto model = parla::models::build_seq2seq(cfg, 60, 60);
    model->eval();
    if (output > 0) {
      torch::NoGradGuard no_grad;
      std::dynamic_pointer_cast<parla::models::TransformerModel>(model)->output_bias.normal_(0.0, 0.5);
    }
    parla::testing::prepare_for_decoding(*model, kind);
    const auto src = random_sources(12, 60, 6, 7);
    for (int min_length : {0, 3}) {
      SearchOptions fast = options(4, 1.0), slow = options(4, 1.0);
      fast.n_best = slow.n_best = 4;
      fast.max_length_factor = slow.max_length_factor = 1;
      fast.max_length_offset = slow.max_length_offset = 2;  // short limits: most sentences end forced
      fast.min_length = slow.min_length = min_length;
      slow.attention = true;
      auto want = beam_search(*model, make_source(src), slow);
      auto got = beam_search(*model, make_source(src), fast);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < src.size(); ++i) {
        INFO(kind << " output layer " << output << " min_length " << min_length << " sentence " << i);
        same_lists(got[i], want[i], /*compare_alignments=*/false);  // the slow path kept alignments
        // The decoding kinds that promise batch invariance (packed fp32 and int8; LibTorch's own fp32 products
        // round differently with the batch's padding) give a sentence alone the same list.
        if (kind != "fp32") same_lists(beam_search(*model, make_source({src[i]}), fast)[0], want[i], false);
      }
    }
  }
}

// SearchOptions::target_prefix (decoding.target_prefix, the forced language token of decoding.target_lang): every
// search's outputs start with the prefix, each forced token scores 0 (given, not chosen: transformers'
// forced_bos_token_id), and what follows is what the model gives after it. References: brute force over the toy
// model's exact log-probabilities, and teacher-forced passes of a real (tiny) Transformer.
#include <catch2/catch.hpp>

#include <cmath>

#include <torch/torch.h>

#include "decode/search.h"
#include "models/factory.h"
#include "models/tiny_config.h"
#include "toy_model.h"

using namespace parla;
using namespace parla::decode;
using parla::decode::testing::make_source;
using parla::decode::testing::random_sources;
using parla::decode::testing::toy_log_probs;
using parla::decode::testing::ToyModel;

namespace {

SearchOptions prefix_options(int beam, std::vector<int64_t> prefix) {
  SearchOptions o;
  o.beam_size = beam;
  o.n_best = beam;
  o.max_length_factor = 1;
  o.max_length_offset = 5;
  o.length_penalty = 0;
  o.target_prefix = std::move(prefix);
  return o;
}

// log P(tokens + EOS | source) from position `from` on, by the toy model's exact log-probabilities.
double toy_tail_log_prob(const std::vector<int64_t>& source, std::vector<int64_t> tokens, size_t from, int64_t vocab,
                         uint64_t seed) {
  tokens.push_back(kEosId);
  double sum = 0;
  for (size_t t = from; t < tokens.size(); ++t) {
    const std::vector<int64_t> before(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(t));
    sum += toy_log_probs(source, before, vocab, seed, 0.5)[static_cast<size_t>(tokens[t])];
  }
  return sum;
}

}  // namespace

TEST_CASE("target prefix: greedy and beam outputs start with the forced tokens, which score 0, and continue as "
          "the model gives (toy model, brute force)") {
  const int64_t vocab = 9;
  ToyModel model(vocab, 5);
  const auto sources = random_sources(5, vocab, 2, 6);
  const auto src = make_source(sources);
  const std::vector<int64_t> prefix = {7, 4};
  for (int beam : {1, 4}) {
    INFO("beam " << beam);
    const auto with = search(model, src, prefix_options(beam, prefix));
    for (size_t i = 0; i < sources.size(); ++i) {
      const auto source = parla::decode::testing::row_tokens(src, static_cast<int64_t>(i));  // EOS included
      REQUIRE(!with[i].empty());
      for (const auto& h : with[i]) {
        REQUIRE(h.tokens.size() >= prefix.size());
        CHECK(std::equal(prefix.begin(), prefix.end(), h.tokens.begin()));
        CHECK(std::abs(h.log_prob - toy_tail_log_prob(source, h.tokens, prefix.size(), vocab, 5)) < 1e-4);
      }
      if (beam == 1) {
        // Greedy after the prefix: each token the first maximum of the toy distribution, EOS ending it.
        std::vector<int64_t> expect = prefix;
        const int64_t limit = static_cast<int64_t>(sources[i].size()) + 5;
        while (static_cast<int64_t>(expect.size()) < limit) {
          const auto lp = toy_log_probs(source, expect, vocab, 5, 0.5);
          int64_t best = -1;
          for (int64_t v = 0; v < vocab; ++v)
            if (v != kPadId && v != kBosId && (best < 0 || lp[static_cast<size_t>(v)] > lp[static_cast<size_t>(best)]))
              best = v;
          if (best == kEosId) break;
          expect.push_back(best);
        }
        CHECK(with[i][0].tokens == expect);
      }
    }
  }
}

TEST_CASE("target prefix on a Transformer: scores are the teacher-forced log-probabilities after the prefix, on "
          "the logits path and the tensor path of beam search alike") {
  torch::NoGradGuard no_grad;
  torch::manual_seed(3);
  auto cfg = parla::testing::tiny_transformer();
  cfg.dropout = 0;
  auto model = models::build_seq2seq(cfg, 40, 40);
  model->eval();
  const auto src = make_source(random_sources(4, 40, 9, 10));
  const std::vector<int64_t> prefix = {17};
  for (const bool tensor_path : {false, true}) {
    for (int beam : {1, 3}) {
      INFO("beam " << beam << (tensor_path ? ", tensor path" : ", logits path"));
      auto o = prefix_options(beam, prefix);
      o.device_candidates = tensor_path;
      const auto out = search(*model, src, o);
      for (int64_t i = 0; i < src.size(0); ++i) {
        for (const auto& h : out[static_cast<size_t>(i)]) {
          REQUIRE(!h.tokens.empty());
          CHECK(h.tokens[0] == prefix[0]);
          std::vector<int64_t> in = {model->start_id()};
          in.insert(in.end(), h.tokens.begin(), h.tokens.end());
          std::vector<int64_t> want = h.tokens;
          want.push_back(kEosId);
          auto lp = torch::log_softmax(model->forward(src[i].unsqueeze(0), torch::tensor(in).view({1, -1})), -1)[0];
          double sum = 0;
          for (size_t t = prefix.size(); t < want.size(); ++t) sum += lp[static_cast<int64_t>(t)][want[t]].item<double>();
          CHECK(std::abs(sum - h.log_prob) < 1e-3);
        }
      }
    }
  }
}

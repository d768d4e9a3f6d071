// decode/between_steps.h: every search calls the thread's hook between decoder steps, a search run from inside
// the hook (parla-serve's preemption) leaves both its own results and the interrupted search's unchanged, and a
// hook can abandon a search. The reference is each search run on its own.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "decode/between_steps.h"
#include "decode/ensemble.h"
#include "decode/search.h"
#include "models/factory.h"
#include "models/tiny_config.h"
#include "toy_model.h"

using namespace parla;
using namespace parla::decode;
using parla::decode::testing::make_source;
using parla::decode::testing::random_sources;

namespace {

std::shared_ptr<models::Seq2SeqModel> build_for_hook(ModelConfig cfg) {
  cfg.dropout = 0;
  auto m = models::build_seq2seq(cfg, 40, 40);
  m->eval();
  return m;
}

SearchOptions hook_options(int beam, int n_best) {
  SearchOptions o;
  o.beam_size = beam;
  o.n_best = n_best;
  o.max_length_factor = 2;
  o.max_length_offset = 6;
  o.length_penalty = 0.6;
  o.scores = true;
  return o;
}

// Bit for bit: the same tokens and the same float scores.
void same_bits(const std::vector<NBestList>& got, const std::vector<NBestList>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    REQUIRE(got[i].size() == want[i].size());
    for (size_t k = 0; k < want[i].size(); ++k) {
      CHECK(got[i][k].tokens == want[i][k].tokens);
      CHECK(got[i][k].score == want[i][k].score);
    }
  }
}

}  // namespace

TEST_CASE("between steps: a search run inside another's hook gives both the results they give alone") {
  torch::NoGradGuard no_grad;
  torch::manual_seed(11);
  auto transformer = build_for_hook(parla::testing::tiny_transformer());
  auto rnn = build_for_hook(parla::testing::tiny_rnn());
  auto ensemble = std::make_shared<Ensemble>(std::vector<std::shared_ptr<models::Seq2SeqModel>>{transformer, rnn});
  const auto outer_src = make_source(random_sources(6, 40, 3, 14));
  const auto inner_src = make_source(random_sources(3, 40, 4, 5));
  for (auto [name, model] : {std::pair<const char*, std::shared_ptr<models::Seq2SeqModel>>{"transformer", transformer},
                             {"rnn", rnn},
                             {"ensemble", ensemble}}) {
    for (auto [outer_beam, inner_beam] : {std::pair{4, 1}, std::pair{1, 3}, std::pair{3, 2}}) {
      INFO(name << ", outer beam " << outer_beam << ", inner beam " << inner_beam);
      const auto outer_o = hook_options(outer_beam, outer_beam > 1 ? 2 : 1);
      const auto inner_o = hook_options(inner_beam, 1);
      const auto outer_alone = search(*model, outer_src, outer_o);
      const auto inner_alone = search(*model, inner_src, inner_o);
      int calls = 0, inner_calls = 0;
      std::vector<NBestList> inner_nested;
      std::vector<NBestList> outer_nested;
      {
        BetweenSteps hook([&] {
          ++calls;
          if (calls != 2) return;
          // The nested search has a hook of its own; this one is not re-entered meanwhile.
          BetweenSteps inner_hook([&] { ++inner_calls; });
          inner_nested = search(*model, inner_src, inner_o);
        });
        outer_nested = search(*model, outer_src, outer_o);
      }
      same_bits(outer_nested, outer_alone);
      same_bits(inner_nested, inner_alone);
      CHECK(calls >= 2);
      CHECK(inner_calls >= 1);
      // One call per step but the first: the longest output plus its EOS is the number of steps at least.
      size_t longest = 0;
      for (const auto& list : outer_alone) longest = std::max(longest, list[0].tokens.size());
      CHECK(static_cast<size_t>(calls) >= longest);
    }
  }
}

TEST_CASE("between steps: a hook that throws SearchInterrupted abandons the search, and no hook is left behind") {
  torch::NoGradGuard no_grad;
  torch::manual_seed(12);
  auto model = build_for_hook(parla::testing::tiny_transformer());
  const auto src = make_source(random_sources(4, 40, 5, 10));
  for (int beam : {1, 4}) {
    int calls = 0;
    {
      BetweenSteps hook([&] {
        if (++calls == 3) throw SearchInterrupted("gone");
      });
      CHECK_THROWS_AS(search(*model, src, hook_options(beam, 1)), SearchInterrupted);
    }
    CHECK(calls == 3);
    // Out of the scope nothing is called any more.
    const int before = calls;
    search(*model, src, hook_options(beam, 1));
    CHECK(calls == before);
  }
}

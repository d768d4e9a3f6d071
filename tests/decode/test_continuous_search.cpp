// Continuous batching (decode/beam_search.h's BeamSearch::add between steps): sentences that join a search
// already running, at different steps and with sources of different lengths, must get the translations they
// get when each is searched alone. The reference is beam_search on a batch of one; tokens must be equal and
// scores equal up to the float rounding that any change of batch brings (the tolerance of the batch test in
// test_real_models.cpp).
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include <torch/torch.h>

#include "decode/beam_search.h"
#include "decode/ensemble.h"
#include "models/decoding_kind.h"
#include "models/factory.h"
#include "models/tiny_config.h"
#include "support/cuda.h"
#include "same_lists.h"
#include "toy_model.h"

using namespace parla;
using namespace parla::decode;
using parla::decode::testing::make_source;
using parla::decode::testing::random_sources;
using parla::decode::testing::same_lists;

namespace {

struct NamedModel {
  std::string name;
  std::shared_ptr<models::Seq2SeqModel> model;
};

std::shared_ptr<models::Seq2SeqModel> build_for_search(ModelConfig cfg) {
  cfg.dropout = 0;
  auto m = models::build_seq2seq(cfg, 40, 40);
  m->eval();
  return m;
}

// Every decoder state kind: the Transformer's attention variants and position kinds, both RNN cells and
// attentions, and an ensemble of a Transformer and an RNN.
std::vector<NamedModel> models_under_test() {
  torch::manual_seed(5);
  std::vector<NamedModel> out;
  auto t = parla::testing::tiny_transformer();
  out.push_back({"transformer", build_for_search(t)});
  auto pre = t;
  pre.norm = parla::LayerNormPlacement::kPre;
  pre.positions = parla::PositionEncoding::kLearned;
  out.push_back({"transformer pre-norm, learned positions", build_for_search(pre)});
  auto local = t;
  local.attention = parla::AttentionKind::kLocal;
  local.local_window = 3;
  out.push_back({"transformer local attention", build_for_search(local)});
  auto linear = t;
  linear.attention = parla::AttentionKind::kLinear;
  out.push_back({"transformer linear attention", build_for_search(linear)});
  auto gru = parla::testing::tiny_rnn();
  out.push_back({"rnn gru bahdanau", build_for_search(gru)});
  auto lstm = gru;
  lstm.rnn_cell = parla::RnnCell::kLstm;
  lstm.rnn_attention = parla::RnnAttention::kLuong;
  out.push_back({"rnn lstm luong", build_for_search(lstm)});
  out.push_back({"ensemble", std::make_shared<Ensemble>(
                                 std::vector<std::shared_ptr<models::Seq2SeqModel>>{out[0].model, out[4].model})});
  return out;
}

// The same tokens, and scores equal up to the rounding a change of batch brings.
void close_lists(const NBestList& got, const NBestList& want) {
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    CHECK(got[k].tokens == want[k].tokens);
    CHECK(got[k].score == Approx(want[k].score).epsilon(1e-4));
  }
}

SearchOptions continuous_options(int beam, int n_best) {
  SearchOptions o;
  o.beam_size = beam;
  o.n_best = n_best;
  o.max_length_factor = 1.5;
  o.max_length_offset = 3;
  o.length_penalty = 0.6;
  return o;
}

// Runs `sentences` through one BeamSearch: `first` sentences at the start, then after every step 0-3 more
// (random), so that sentences join at many different steps, sometimes into an emptied search. Returns each
// sentence's n-best by id; `max_rows` receives the largest batch seen.
std::map<int64_t, NBestList> run_continuously(models::Seq2SeqModel& model, const std::vector<std::vector<int64_t>>& sentences,
                                        const SearchOptions& o, size_t first, unsigned seed, int64_t& max_rows,
                                        int& restarts, const torch::Device& device = torch::kCPU) {
  std::mt19937 rng(seed);
  BeamSearch search(model, o);
  std::map<int64_t, NBestList> out;
  size_t next = 0;
  auto add = [&](size_t count) {
    count = std::min(count, sentences.size() - next);
    if (count == 0) return;
    std::vector<std::vector<int64_t>> group(sentences.begin() + next, sentences.begin() + next + count);
    std::vector<int64_t> ids;
    for (size_t i = 0; i < count; ++i) ids.push_back(static_cast<int64_t>(next + i));
    if (search.size() == 0 && next > 0) ++restarts;
    search.add(make_source(group).to(device), ids);
    next += count;
  };
  add(first);
  while (search.size() > 0 || next < sentences.size()) {
    if (search.size() == 0) add(1 + rng() % 3);
    max_rows = std::max(max_rows, search.rows());
    for (auto& [id, best] : search.step()) {
      CHECK(out.count(id) == 0);
      out[id] = std::move(best);
    }
    // Mostly one or two joins per step, sometimes a pause long enough for the search to empty.
    const unsigned r = rng() % 10;
    if (r < 6) add(1 + rng() % 3);
  }
  return out;
}

}  // namespace

TEST_CASE("continuous search: sentences joining a running search at any step get their results from a search "
          "of their own", "[continuous]") {
  const auto sentences = random_sources(60, 40, 21, 14);
  for (auto& [name, model] : models_under_test()) {
    for (auto [beam, n_best] : {std::pair{1, 1}, std::pair{3, 2}}) {
      const auto o = continuous_options(beam, n_best);
      int64_t max_rows = 0;
      int restarts = 0;
      auto got = run_continuously(*model, sentences, o, 4, 7, max_rows, restarts);
      REQUIRE(got.size() == sentences.size());
      CHECK(max_rows > 4 * beam);  // the batch really grew while it ran
      for (size_t i = 0; i < sentences.size(); ++i) {
        auto alone = beam_search(*model, make_source({sentences[i]}), o)[0];
        const auto& joined = got[static_cast<int64_t>(i)];
        INFO(name << ", beam " << beam << ", sentence " << i);
        close_lists(joined, alone);
      }
    }
  }
}

TEST_CASE("continuous search: a search that runs far longer than any sentence renumbers its steps and stays "
          "correct", "[continuous]") {
  // 150 sentences joining one or two per step keep one search alive for well over 100 steps, so the
  // Transformer state renumbers its positions (every 32 steps of its oldest row) several times.
  torch::manual_seed(8);
  auto t = parla::testing::tiny_transformer();
  t.max_positions = 32;  // learned positions: a row's position must restart at 0 whatever the search's step
  t.positions = parla::PositionEncoding::kLearned;
  auto model = build_for_search(t);
  const auto sentences = random_sources(150, 40, 33, 14);
  const auto o = continuous_options(2, 1);
  BeamSearch search(*model, o);
  std::map<int64_t, NBestList> got;
  size_t next = 0;
  int steps = 0, run = 0, longest_run = 0;  // steps without the search emptying
  while (next < sentences.size() || search.size() > 0) {
    if (next < sentences.size()) {
      const size_t n = std::min<size_t>(1 + steps % 2, sentences.size() - next);
      std::vector<std::vector<int64_t>> group(sentences.begin() + next, sentences.begin() + next + n);
      std::vector<int64_t> ids;
      for (size_t i = 0; i < n; ++i) ids.push_back(static_cast<int64_t>(next + i));
      search.add(make_source(group), ids);
      next += n;
    }
    for (auto& [id, best] : search.step()) got[id] = std::move(best);
    ++steps;
    run = search.size() > 0 ? run + 1 : 0;
    longest_run = std::max(longest_run, run);
  }
  CHECK(longest_run > 96);
  REQUIRE(got.size() == sentences.size());
  for (size_t i = 0; i < sentences.size(); i += 3) {
    auto alone = beam_search(*model, make_source({sentences[i]}), o)[0];
    INFO("sentence " << i);
    CHECK(got[static_cast<int64_t>(i)][0].tokens == alone[0].tokens);
  }
}

TEST_CASE("continuous search on a GPU: joining sentences get the results of a search of their own there",
          "[continuous][cuda]") {
  PARLA_REQUIRE_CUDA();
  // Same device on both sides (the CPU/GPU comparison is test_real_models' business): the masked attention
  // path, the row starts on the device and the renumbering's device-to-host read.
  const torch::Device gpu(torch::kCUDA, 0);
  const auto sentences = random_sources(40, 40, 23, 14);
  for (auto& [name, model] : models_under_test()) {
    model->to(gpu);
    const auto o = continuous_options(3, 2);
    int64_t max_rows = 0;
    int restarts = 0;
    auto got = run_continuously(*model, sentences, o, 4, 9, max_rows, restarts, gpu);
    REQUIRE(got.size() == sentences.size());
    for (size_t i = 0; i < sentences.size(); ++i) {
      auto alone = beam_search(*model, make_source({sentences[i]}).to(gpu), o)[0];
      INFO(name << ", sentence " << i);
      REQUIRE(got[static_cast<int64_t>(i)].size() == alone.size());
      CHECK(got[static_cast<int64_t>(i)][0].tokens == alone[0].tokens);
      CHECK(got[static_cast<int64_t>(i)][0].score == Approx(alone[0].score).epsilon(1e-4));
    }
  }
}

TEST_CASE("continuous search: sentences removed from a running search never come back, and the others' results "
          "do not change", "[continuous]") {
  torch::manual_seed(4);
  auto models = models_under_test();
  const auto sentences = random_sources(30, 40, 41, 14);
  for (size_t m : {size_t{0}, size_t{4}}) {  // a Transformer and an RNN
    auto& [name, model] = models[m];
    const auto o = continuous_options(3, 1);
    BeamSearch search(*model, o);
    std::map<int64_t, NBestList> got;
    std::set<int64_t> removed;
    size_t next = 0;
    for (int step = 0; next < sentences.size() || search.size() > 0; ++step) {
      if (next < sentences.size() && step % 2 == 0) {
        const size_t n = std::min<size_t>(3, sentences.size() - next);
        std::vector<std::vector<int64_t>> group(sentences.begin() + next, sentences.begin() + next + n);
        std::vector<int64_t> ids;
        for (size_t i = 0; i < n; ++i) ids.push_back(static_cast<int64_t>(next + i));
        search.add(make_source(group), ids);
        next += n;
      }
      if (step % 3 == 1) {  // every third step the newest sentence still in the search leaves, plus an unknown id
        const int64_t victim = static_cast<int64_t>(next) - 1;
        if (got.count(victim) == 0 && removed.count(victim) == 0) removed.insert(victim);
        search.remove({victim, 1000});
      }
      for (auto& [id, best] : search.step()) {
        CHECK(removed.count(id) == 0);
        got[id] = std::move(best);
      }
    }
    CHECK(removed.size() >= 5);
    CHECK(got.size() + removed.size() == sentences.size());
    for (const auto& [id, best] : got) {
      auto alone = beam_search(*model, make_source({sentences[static_cast<size_t>(id)]}), o)[0];
      INFO(name << ", sentence " << id);
      CHECK(best[0].tokens == alone[0].tokens);
    }
  }
}

TEST_CASE("continuous search: a fresh search's first step runs one decoder row per sentence, and sentences that "
          "join or leave before it get the results of a search that started with beam rows", "[continuous]") {
  // Two ways through one first step: all sentences in one add() (one decoder row each, the beam's rows come from
  // that row's candidates), or in two add()s before any step (the second expands the first group to beam rows
  // per sentence, rows 1.. dead, as a sentence joining a running search has). Every hypothesis row is the same
  // empty prefix until then, so the n-best lists must be the same; with the toy model (every row computed alone,
  // in double) and the Transformer's batch-invariant kinds to the bit.
  using parla::decode::testing::ToyModel;
  const auto sentences = random_sources(10, 40, 51, 9);
  const auto first_half = std::vector<std::vector<int64_t>>(sentences.begin(), sentences.begin() + 4);
  const auto second_half = std::vector<std::vector<int64_t>>(sentences.begin() + 4, sentences.end());
  std::vector<int64_t> ids(sentences.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
  const std::vector<int64_t> first_ids(ids.begin(), ids.begin() + 4), second_ids(ids.begin() + 4, ids.end());
  auto finish = [](BeamSearch& search) {
    std::map<int64_t, NBestList> out;
    while (search.size() > 0)
      for (auto& [id, best] : search.step()) out[id] = std::move(best);
    return out;
  };
  const int beam = 4;
  auto o = continuous_options(beam, 3);

  SECTION("the toy model: decoder rows of the first step, and the same lists to the bit") {
    ToyModel one_model(40, 9, 0.3), two_model(40, 9, 0.3);
    BeamSearch one(one_model, o), two(two_model, o);
    one.add(make_source(sentences), ids);
    two.add(make_source(first_half), first_ids);
    two.add(make_source(second_half), second_ids);
    CHECK(one.rows() == beam * 10);  // hypothesis rows, as before
    auto first = one.step();
    two.step();
    CHECK(one_model.rows_stepped == 10);
    CHECK(two_model.rows_stepped == beam * 10);
    auto got = finish(one), want = finish(two);
    for (auto& [id, best] : first) got[id] = std::move(best);
    REQUIRE(got.size() == sentences.size());
    REQUIRE(want.size() == sentences.size());
    for (int64_t i : ids) {
      INFO("sentence " << i);
      same_lists(got[i], want[i]);
    }
  }

  SECTION("every decoder state kind: the same tokens; the Transformer's packed and int8 kinds the same bits") {
    auto models = models_under_test();
    for (std::string kind : {"packed", "int8"}) {
      auto cfg = parla::testing::tiny_transformer();
      cfg.dropout = 0;
      torch::manual_seed(8);
      auto m = models::build_seq2seq(cfg, 40, 40);
      m->eval();
      parla::testing::prepare_for_decoding(*m, kind);
      models.push_back({"transformer " + kind, m});
    }
    for (auto& [name, model] : models) {
      const bool bits = name == "transformer packed" || name == "transformer int8";
      BeamSearch one(*model, o), two(*model, o);
      one.add(make_source(sentences), ids);
      two.add(make_source(first_half), first_ids);
      two.add(make_source(second_half), second_ids);
      auto got = finish(one), want = finish(two);
      REQUIRE(got.size() == sentences.size());
      for (int64_t i : ids) {
        INFO(name << ", sentence " << i);
        bits ? same_lists(got[i], want[i]) : close_lists(got[i], want[i]);
      }
      // Sentences leaving before the first step: the others' lists do not change.
      BeamSearch three(*model, o);
      three.add(make_source(sentences), ids);
      three.remove({1, 6, 1000});
      auto left = finish(three);
      CHECK(left.size() == sentences.size() - 2);
      CHECK(left.count(1) == 0);
      CHECK(left.count(6) == 0);
      for (auto& [id, best] : left) {
        INFO(name << ", after removals, sentence " << id);
        bits ? same_lists(best, want[id]) : close_lists(best, want[id]);
      }
    }
  }
}

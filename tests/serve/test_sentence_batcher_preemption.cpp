// Preemption (serve.preempt_ms) with a stepping toy decoder: a sentence of n ids takes n decoder steps, and the
// decoder calls decode::between_steps() between them as the real searches do. A batch of much cheaper sentences
// runs inside a long one and is answered first; work of like cost waits; a batch nobody waits for stops.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <catch2/catch.hpp>

#include "decode/between_steps.h"
#include "serve/search_with.h"
#include "serve/batcher_limits.h"
#include "serve/sentence_batcher.h"
#include "serve/server_metrics.h"

using namespace parla::serve;
using parla::testing::search_with;
using namespace std::chrono_literals;

namespace {

std::string stepped_text(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ".") + std::to_string(id);
  return s;
}

struct Stepper {
  std::chrono::milliseconds step_time{2};
  std::atomic<int> depth{0}, deepest{0}, started{0}, steps{0};
  std::mutex mutex;
  std::vector<int> first_ids_by_start;  // the first sentence's first id of each batch, in the order they started

  BatchDecoder decoder() {
    return [this](const std::vector<std::vector<int>>& sources, const SearchOptions& s) {
      const int d = ++depth;
      struct Leave {
        std::atomic<int>& depth;
        ~Leave() { --depth; }
      } leave{depth};
      int seen = deepest.load();
      while (d > seen && !deepest.compare_exchange_weak(seen, d)) {
      }
      {
        std::lock_guard<std::mutex> lock(mutex);
        first_ids_by_start.push_back(sources[0][0]);
      }
      ++started;
      size_t longest = 0;
      for (const auto& src : sources) longest = std::max(longest, src.size());
      for (size_t step = 0; step < longest; ++step) {
        if (step > 0) parla::decode::between_steps();
        ++steps;
        std::this_thread::sleep_for(step_time);
      }
      std::vector<std::vector<Translation>> out;
      for (const auto& src : sources) {
        std::vector<Translation> nbest;
        for (int k = 0; k < s.n_best; ++k) nbest.push_back({stepped_text(src), -static_cast<float>(k), src.size()});
        out.push_back(nbest);
      }
      return out;
    };
  }
};

// `sentences` sentences of `length` ids, the first id naming the request.
std::vector<std::vector<int>> sentences_of(int id, int sentences, int length) {
  std::vector<std::vector<int>> r;
  for (int i = 0; i < sentences; ++i) {
    std::vector<int> s(static_cast<size_t>(length), 7);
    s[0] = id;
    s[1] = i;
    r.push_back(s);
  }
  return r;
}

void check_stepped(const std::shared_ptr<Ticket>& t, const std::vector<std::vector<int>>& sources) {
  REQUIRE(t->wait_for(20000ms));
  REQUIRE(t->failure().empty());
  REQUIRE(t->results().size() == sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    REQUIRE_FALSE(t->results()[i].empty());
    CHECK(t->results()[i][0].text == stepped_text(sources[i]));
  }
}

// Batches of up to 8 sentences, decoded at once, preempted after `preempt_ms`.
BatcherLimits preempting(double preempt_ms) {
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.batch_size = 8;
  limits.max_wait_ms = 0;
  limits.preempt_ms = preempt_ms;
  return limits;
}

void wait_for_state(const std::function<bool()>& ready) {
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!ready() && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(1ms);
  REQUIRE(ready());
}

}  // namespace

TEST_CASE("preemption: a request of short sentences is decoded inside a batch of long ones and answered first") {
  for (double preempt_ms : {50.0, 0.0}) {
    DYNAMIC_SECTION("preempt_ms " << preempt_ms) {
      Stepper dec;
      SentenceBatcher batcher(preempting(preempt_ms), dec.decoder());
      const auto opts = search_with(5, 1);
      // 8 sentences of 400 ids: cost 5 x (2 x 400 + 10) each (the decoding defaults), 400 steps of 2 ms.
      auto long_req = sentences_of(1, 8, 400);
      auto short_req = sentences_of(2, 2, 4);  // 5 x 18: far below a quarter
      auto tl = batcher.submit(long_req, opts);
      wait_for_state([&] { return dec.started.load() == 1; });
      auto ts = batcher.submit(short_req, opts);
      REQUIRE(ts->wait_for(20000ms));
      const bool long_done_first = tl->wait_for(0ms);
      check_stepped(ts, short_req);
      check_stepped(tl, long_req);
      batcher.stop();
      if (preempt_ms > 0) {
        CHECK_FALSE(long_done_first);
        CHECK(dec.deepest.load() == 2);  // decoded between two steps of the long batch
      } else {
        CHECK(long_done_first);
        CHECK(dec.deepest.load() == 1);
      }
    }
  }
}

TEST_CASE("preemption: sentences that cost more than a quarter of the running batch's costliest wait for it") {
  Stepper dec;
  SentenceBatcher batcher(preempting(20), dec.decoder());
  const auto opts = search_with(5, 1);
  auto long_req = sentences_of(1, 2, 200);   // cost 5 x 410 = 2,050
  auto like_req = sentences_of(2, 2, 60);    // 5 x 130 = 650 > 2,050 / 4
  auto tl = batcher.submit(long_req, opts);
  wait_for_state([&] { return dec.started.load() == 1; });
  auto tk = batcher.submit(like_req, opts);
  check_stepped(tk, like_req);
  CHECK(tl->wait_for(0ms));  // the long batch ended before the other started
  check_stepped(tl, long_req);
  batcher.stop();
  CHECK(dec.deepest.load() == 1);
}

TEST_CASE("preemption: a preempting batch is preempted in turn only by cheaper work still, and every result "
          "returns to its request") {
  Stepper dec;
  SentenceBatcher batcher(preempting(20), dec.decoder());
  const auto opts = search_with(5, 1);
  auto long_req = sentences_of(1, 2, 600);   // cost 5 x 1,210 = 6,050
  auto mid_req = sentences_of(2, 2, 140);    // 5 x 290 = 1,450 <= 6,050 / 4
  auto short_req = sentences_of(3, 2, 10);   // 5 x 30 = 150 <= 1,450 / 4
  auto tl = batcher.submit(long_req, opts);
  wait_for_state([&] { return dec.started.load() == 1; });
  auto tm = batcher.submit(mid_req, opts);
  wait_for_state([&] { return dec.started.load() == 2; });
  auto ts = batcher.submit(short_req, opts);
  check_stepped(ts, short_req);
  CHECK_FALSE(tm->wait_for(0ms));
  check_stepped(tm, mid_req);
  CHECK_FALSE(tl->wait_for(0ms));
  check_stepped(tl, long_req);
  batcher.stop();
  CHECK(dec.deepest.load() == 3);
  CHECK(dec.first_ids_by_start == std::vector<int>{1, 2, 3});
}

TEST_CASE("preemption: different search options do not stop a cheap request from going first") {
  Stepper dec;
  SentenceBatcher batcher(preempting(20), dec.decoder());
  auto long_req = sentences_of(1, 4, 300);
  auto short_req = sentences_of(2, 1, 5);
  auto tl = batcher.submit(long_req, search_with(10, 1));
  wait_for_state([&] { return dec.started.load() == 1; });
  auto ts = batcher.submit(short_req, search_with(1, 1));
  check_stepped(ts, short_req);
  CHECK_FALSE(tl->wait_for(0ms));
  check_stepped(tl, long_req);
  batcher.stop();
}

TEST_CASE("a batch whose requests were all cancelled stops at its next decoder step, and the next batch goes on") {
  Stepper dec;
  ServerMetrics metrics;
  SentenceBatcher batcher(preempting(0), dec.decoder(), &metrics);
  const auto opts = search_with(5, 1);
  auto long_req = sentences_of(1, 3, 2000);  // 2,000 steps of 2 ms if it ran to its end
  auto tl = batcher.submit(long_req, opts);
  wait_for_state([&] { return dec.steps.load() >= 5; });
  tl->cancel();
  auto next_req = sentences_of(2, 1, 5);
  auto tn = batcher.submit(next_req, opts);
  check_stepped(tn, next_req);
  batcher.stop();
  CHECK(dec.steps.load() < 1000);
  CHECK_THAT(metrics.render(), Catch::Contains("parla_dropped_sentences_total 3"));
}

TEST_CASE("serve.max_batch_cost bounds the summed cost of every batch, and a sentence alone beyond it still gets "
          "a batch") {
  std::mutex mutex;
  std::vector<double> costs;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.batch_size = 64;
  limits.max_wait_ms = 0;
  limits.max_batch_cost = 4000;
  std::atomic<bool> hold{true};
  SentenceBatcher batcher(limits, [&](const std::vector<std::vector<int>>& sources, const SearchOptions& s) {
    while (hold) std::this_thread::sleep_for(1ms);
    double c = 0;
    for (const auto& src : sources) c += sentence_cost(s, src.size());
    {
      std::lock_guard<std::mutex> lock(mutex);
      costs.push_back(c);
    }
    std::vector<std::vector<Translation>> out;
    for (const auto& src : sources) out.push_back({Translation{stepped_text(src), 0.f, src.size()}});
    return out;
  });
  const auto opts = search_with(5, 1);
  auto many = sentences_of(1, 40, 20);  // at least three batches' worth
  auto huge = sentences_of(2, 1, 500);  // beyond the bound alone
  const double many_cost = 40 * sentence_cost(opts, 20), huge_cost = sentence_cost(opts, 500);
  REQUIRE(many_cost > 3 * 4000);
  REQUIRE(huge_cost > 4000);
  auto tm = batcher.submit(many, opts);
  auto th = batcher.submit(huge, opts);
  hold = false;
  check_stepped(tm, many);
  check_stepped(th, huge);
  batcher.stop();
  std::lock_guard<std::mutex> lock(mutex);
  double total = 0;
  int over = 0;
  for (double c : costs) {
    total += c;
    if (c > 4000) ++over;
  }
  CHECK(total == Approx(many_cost + huge_cost));
  CHECK(over == 1);  // the huge sentence, alone
  CHECK(costs.size() >= 4);
}

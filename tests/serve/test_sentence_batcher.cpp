// The cross-request batcher with a recording toy decoder: which sentences share a batch, that every result goes
// back to its request and position, fairness, budgets, limits, cancellation and failures.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <catch2/catch.hpp>

#include "serve/search_with.h"
#include "serve/batcher_limits.h"
#include "serve/sentence_batcher.h"
#include "serve/server_metrics.h"

using namespace parla::serve;
using parla::testing::search_with;
using namespace std::chrono_literals;

namespace {

// Decodes a sentence into the decimal ids it holds, joined by '.', so that a misrouted result is visible.
std::string expected_text(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ".") + std::to_string(id);
  return s;
}

struct Recorder {
  std::mutex mutex;
  std::vector<std::vector<std::vector<int>>> batches;
  std::vector<SearchOptions> settings;
  std::chrono::milliseconds delay{0};
  std::atomic<bool> hold{false};  // while set, the decoder waits (to let requests pile up)
  std::atomic<int> entered{0};     // batches the decoder has started

  BatchDecoder decoder() {
    return [this](const std::vector<std::vector<int>>& sources, const SearchOptions& s) {
      ++entered;
      while (hold) std::this_thread::sleep_for(1ms);
      if (delay.count() > 0) std::this_thread::sleep_for(delay);
      {
        std::lock_guard<std::mutex> lock(mutex);
        batches.push_back(sources);
        settings.push_back(s);
      }
      std::vector<std::vector<Translation>> out;
      for (const auto& src : sources) {
        std::vector<Translation> nbest;
        for (int k = 0; k < s.n_best; ++k)
          nbest.push_back({expected_text(src) + (k ? "#" + std::to_string(k) : ""), -static_cast<float>(k),
                           src.size()});
        out.push_back(nbest);
      }
      return out;
    };
  }
};

std::vector<std::vector<int>> request(int id, int sentences, int length = 3) {
  std::vector<std::vector<int>> r;
  for (int i = 0; i < sentences; ++i) {
    std::vector<int> s(static_cast<size_t>(length + i % 4), 0);
    s[0] = id;
    s[1] = i;
    r.push_back(s);
  }
  return r;
}

void check_results(const std::shared_ptr<Ticket>& t, const std::vector<std::vector<int>>& sources) {
  REQUIRE(t->wait_for(5000ms));
  REQUIRE(t->failure().empty());
  REQUIRE(t->results().size() == sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    REQUIRE_FALSE(t->results()[i].empty());
    CHECK(t->results()[i][0].text == expected_text(sources[i]));
  }
}

}  // namespace

TEST_CASE("sentences of many requests are decoded together and each result returns to its request") {
  Recorder rec;
  rec.hold = true;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.batch_size = 16;
  limits.max_wait_ms = 10000;  // only full batches until the end
  ServerMetrics metrics;
  SentenceBatcher batcher(limits, rec.decoder(), &metrics);
  std::vector<std::shared_ptr<Ticket>> tickets;
  std::vector<std::vector<std::vector<int>>> sent;
  for (int r = 0; r < 32; ++r) {
    sent.push_back(request(r, 2));
    tickets.push_back(batcher.submit(sent.back(), {}));
    REQUIRE(tickets.back());
  }
  rec.hold = false;
  // 64 sentences, batches of 16: the last may wait for max_wait; everything full is decoded at once.
  for (int r = 0; r < 32; ++r) {
    if (!tickets[r]->wait_for(3000ms)) break;
  }
  batcher.stop();
  size_t decoded = 0, cross = 0;
  for (const auto& b : rec.batches) {
    CHECK(b.size() <= 16);
    decoded += b.size();
    std::set<int> ids;
    for (const auto& s : b) ids.insert(s[0]);
    if (ids.size() > 1) ++cross;
  }
  CHECK(decoded == 64);
  CHECK(rec.batches.size() == 4);
  CHECK(cross == rec.batches.size());  // every batch mixes requests
  for (int r = 0; r < 32; ++r) check_results(tickets[r], sent[r]);
  CHECK_THAT(metrics.render(), Catch::Contains("parla_sentences_total 64"));
}

TEST_CASE("a large request does not hold back a small one that arrives after it") {
  Recorder rec;
  rec.hold = true;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.batch_size = 8;
  limits.max_wait_ms = 0;
  SentenceBatcher batcher(limits, rec.decoder());
  auto big = request(1, 400);
  auto small = request(2, 1);
  auto tb = batcher.submit(big, {});
  auto ts = batcher.submit(small, {});
  rec.hold = false;
  check_results(ts, small);
  check_results(tb, big);
  batcher.stop();
  // The small request's sentence is in one of the first two batches (the first may have started before it
  // arrived), not after the big request's 50 batches.
  size_t at = rec.batches.size();
  for (size_t b = 0; b < rec.batches.size() && at == rec.batches.size(); ++b)
    for (const auto& s : rec.batches[b])
      if (s[0] == 2) at = b;
  CHECK(at <= 1);
  // Within the big request, sentences are taken longest first: batch lengths never increase.
  size_t last = 1000;
  for (const auto& b : rec.batches) {
    size_t longest = 0;
    for (const auto& s : b)
      if (s[0] == 1) longest = std::max(longest, s.size());
    if (longest == 0) continue;
    CHECK(longest <= last);
    last = longest;
  }
}

TEST_CASE("batch_requests = 1 keeps each batch to one request, and different options never share a batch") {
  Recorder rec;
  rec.hold = true;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.batch_size = 64;
  limits.max_wait_ms = 0;
  limits.batch_requests = 1;
  SentenceBatcher batcher(limits, rec.decoder());
  std::vector<std::shared_ptr<Ticket>> t;
  std::vector<std::vector<std::vector<int>>> sent;
  for (int r = 0; r < 6; ++r) {
    sent.push_back(request(r, 3));
    t.push_back(batcher.submit(sent.back(), search_with(r % 2 ? 2 : 4, 1)));
  }
  rec.hold = false;
  for (int r = 0; r < 6; ++r) check_results(t[r], sent[r]);
  batcher.stop();
  for (const auto& b : rec.batches) {
    std::set<int> ids;
    for (const auto& s : b) ids.insert(s[0]);
    CHECK(ids.size() == 1);
  }

  Recorder mixed;
  mixed.hold = true;
  limits.batch_requests = 0;
  SentenceBatcher b2(limits, mixed.decoder());
  std::vector<std::shared_ptr<Ticket>> t2;
  for (int r = 0; r < 6; ++r) t2.push_back(b2.submit(sent[r], search_with(r % 2 ? 2 : 4, r % 2 ? 2 : 1)));
  mixed.hold = false;
  for (int r = 0; r < 6; ++r) {
    check_results(t2[r], sent[r]);
    CHECK(t2[r]->results()[0].size() == (r % 2 ? 2u : 1u));  // its own n-best
  }
  b2.stop();
  for (size_t b = 0; b < mixed.batches.size(); ++b)
    for (const auto& s : mixed.batches[b]) CHECK(mixed.settings[b].beam_size == (s[0] % 2 ? 2 : 4));
}

TEST_CASE("sentences share a batch only when all their search options are equal, not just beam size and n-best") {
  Recorder rec;
  rec.hold = true;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.batch_size = 64;
  limits.max_wait_ms = 0;
  SentenceBatcher batcher(limits, rec.decoder());
  auto plain = search_with(3, 1), shorter = plain;
  shorter.length_penalty += 0.5;
  std::vector<std::shared_ptr<Ticket>> t;
  std::vector<std::vector<std::vector<int>>> sent;
  for (int r = 0; r < 4; ++r) {
    sent.push_back(request(r, 2));
    t.push_back(batcher.submit(sent.back(), r % 2 ? shorter : plain));
  }
  rec.hold = false;
  for (int r = 0; r < 4; ++r) check_results(t[r], sent[r]);
  batcher.stop();
  for (size_t b = 0; b < rec.batches.size(); ++b)
    for (const auto& s : rec.batches[b]) CHECK(rec.settings[b] == (s[0] % 2 ? shorter : plain));
}

TEST_CASE("the token budget bounds every batch's padded size unless one sentence alone exceeds it") {
  Recorder rec;
  rec.hold = true;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.batch_size = 1000;
  limits.batch_tokens = 40;
  limits.max_wait_ms = 0;
  SentenceBatcher batcher(limits, rec.decoder());
  std::vector<std::vector<int>> sources;
  for (int i = 0; i < 60; ++i) sources.push_back(std::vector<int>(static_cast<size_t>(2 + (i * 7) % 13), i));
  sources.push_back(std::vector<int>(70, 99));  // alone over the budget
  auto t = batcher.submit(sources, {});
  rec.hold = false;
  check_results(t, sources);
  batcher.stop();
  size_t total = 0;
  for (const auto& b : rec.batches) {
    size_t longest = 0;
    for (const auto& s : b) longest = std::max(longest, s.size() + 1);
    total += b.size();
    if (b.size() > 1) CHECK(longest * b.size() <= 40);
  }
  CHECK(total == sources.size());
}

TEST_CASE("a batch that is not full waits max_wait_ms for company, then is decoded") {
  Recorder rec;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.batch_size = 64;
  limits.max_wait_ms = 150;
  SentenceBatcher batcher(limits, rec.decoder());
  const auto start = std::chrono::steady_clock::now();
  auto t = batcher.submit(request(1, 1), {});
  std::this_thread::sleep_for(30ms);
  auto u = batcher.submit(request(2, 1), {});
  REQUIRE(t->wait_for(5000ms));
  REQUIRE(u->wait_for(5000ms));
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= 150ms);
  batcher.stop();
  REQUIRE(rec.batches.size() == 1);  // the second joined the first's batch
  CHECK(rec.batches[0].size() == 2);
}

// 64 clients that each send a sentence when answered: the sentences that came in during a batch have waited
// longer than max_wait_ms when it ends, and without this pause they formed the next batch at once, before the
// clients just answered were back (alternating half batches, 40% fewer sentences per second; issue 36).
TEST_CASE("after a batch, the clients it answered get max_wait_ms to join the next one") {
  Recorder rec;
  rec.hold = true;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.batch_size = 64;
  limits.max_wait_ms = 300;
  SentenceBatcher batcher(limits, rec.decoder());
  auto first = batcher.submit(request(1, 1), {});
  for (int i = 0; i < 5000 && rec.entered == 0; ++i) std::this_thread::sleep_for(1ms);
  REQUIRE(rec.entered == 1);
  auto waiting = batcher.submit(request(2, 1), {});  // arrives during the first batch
  std::this_thread::sleep_for(400ms);                 // and waits longer than max_wait_ms
  rec.hold = false;
  REQUIRE(first->wait_for(5000ms));
  auto back = batcher.submit(request(1, 1), {});  // the first client, answered, sends its next sentence
  REQUIRE(waiting->wait_for(5000ms));
  REQUIRE(back->wait_for(5000ms));
  batcher.stop();
  REQUIRE(rec.batches.size() == 2);
  CHECK(rec.batches[1].size() == 2);
}

TEST_CASE("empty lines are answered at once, a full queue refuses a request whole") {
  Recorder rec;
  rec.hold = true;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.max_queue = 5;
  limits.max_wait_ms = 10000;
  SentenceBatcher batcher(limits, rec.decoder());
  auto empty = batcher.submit({{}, {}}, {});
  REQUIRE(empty);
  REQUIRE(empty->wait_for(0ms));
  CHECK(empty->results()[0][0].text.empty());
  auto a = batcher.submit(request(1, 4), {});
  REQUIRE(a);
  CHECK(batcher.waiting() == 4);
  CHECK(batcher.submit(request(2, 2), {}) == nullptr);  // 4 + 2 > 5: nothing of it is queued
  CHECK(batcher.waiting() == 4);
  CHECK(batcher.submit(request(3, 1), {}) != nullptr);
  rec.hold = false;
  batcher.stop();  // what still waits fails
  CHECK((a->failure().empty() || a->failure().find("stopping") != std::string::npos));
}

TEST_CASE("a cancelled request's waiting sentences are dropped, not decoded") {
  Recorder rec;
  rec.delay = 20ms;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.batch_size = 2;
  limits.max_wait_ms = 0;
  ServerMetrics metrics;
  SentenceBatcher batcher(limits, rec.decoder(), &metrics);
  auto t = batcher.submit(request(1, 100), {});
  std::this_thread::sleep_for(50ms);
  t->cancel();
  auto u = batcher.submit(request(2, 3), {});
  check_results(u, request(2, 3));
  batcher.stop();
  size_t decoded = 0;
  for (const auto& b : rec.batches)
    for (const auto& s : b)
      if (s[0] == 1) ++decoded;
  CHECK(decoded < 20);
  const std::string m = metrics.render();
  CHECK_THAT(m, Catch::Contains("parla_dropped_sentences_total " + std::to_string(100 - decoded)));
}

TEST_CASE("a decoder failure fails the requests of its batch with the reason, and the next batch goes on") {
  std::atomic<int> calls{0};
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.max_wait_ms = 0;
  SentenceBatcher batcher(limits, [&](const std::vector<std::vector<int>>& s, const SearchOptions&) {
    if (calls++ == 0) throw std::runtime_error("out of memory");
    return std::vector<std::vector<Translation>>(s.size(), {Translation{"ok", 0, 1}});
  });
  auto t = batcher.submit(request(1, 2), {});
  REQUIRE(t->wait_for(5000ms));
  CHECK(t->failure() == "out of memory");
  auto u = batcher.submit(request(2, 2), {});
  REQUIRE(u->wait_for(5000ms));
  CHECK(u->failure().empty());
  CHECK(u->results()[1][0].text == "ok");
}

TEST_CASE("the metrics are Prometheus text with cumulative histogram buckets") {
  Histogram h({1, 2, 4});
  for (double v : {0.5, 1.0, 1.5, 3.0, 9.0}) h.observe(v);
  std::string text;
  h.render("x", text);
  CHECK_THAT(text, Catch::Contains("x_bucket{le=\"1\"} 2\n"));
  CHECK_THAT(text, Catch::Contains("x_bucket{le=\"2\"} 3\n"));
  CHECK_THAT(text, Catch::Contains("x_bucket{le=\"4\"} 4\n"));
  CHECK_THAT(text, Catch::Contains("x_bucket{le=\"+Inf\"} 5\n"));
  CHECK_THAT(text, Catch::Contains("x_sum 15\n"));
  CHECK_THAT(text, Catch::Contains("x_count 5\n"));
  ServerMetrics m;
  m.request_done(200, 0.01);
  m.request_done(400, 0.001);
  m.request_done(200, 0.02);
  const std::string all = m.render();
  CHECK_THAT(all, Catch::Contains("parla_requests_total{code=\"200\"} 2\n"));
  CHECK_THAT(all, Catch::Contains("parla_requests_total{code=\"400\"} 1\n"));
  CHECK_THAT(all, Catch::Contains("# TYPE parla_request_duration_seconds histogram\n"));
}

TEST_CASE("a ticket calls its on_done once when done or failed, at once if it already is, never if cancelled") {
  Recorder rec;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.max_wait_ms = 0;
  SentenceBatcher batcher(limits, rec.decoder());
  std::atomic<int> calls{0};
  auto t = batcher.submit(request(1, 5), {});
  t->on_done([&] { ++calls; });
  REQUIRE(t->wait_for(10s));
  for (int i = 0; i < 100 && calls == 0; ++i) std::this_thread::sleep_for(1ms);
  CHECK(calls == 1);
  t->on_done([&] { calls += 10; });  // already done: called here
  CHECK(calls == 11);

  rec.hold = true;  // the decoder waits: the next request stays in the queue
  auto blocker = batcher.submit(request(2, 1), {});
  std::this_thread::sleep_for(20ms);
  auto cancelled = batcher.submit(request(3, 2), {});
  auto failed = batcher.submit(request(4, 2), {});
  std::atomic<int> cancelled_calls{0}, failed_calls{0};
  cancelled->on_done([&] { ++cancelled_calls; });
  failed->on_done([&] { ++failed_calls; });
  cancelled->cancel();
  batcher.fail_waiting("drain timeout");
  CHECK(failed_calls == 1);
  CHECK(cancelled_calls == 0);
  rec.hold = false;
  REQUIRE(blocker->wait_for(10s));
  batcher.stop();
  CHECK(cancelled_calls == 0);
}

// The batcher's continuous mode with a toy stream in which a sentence of n pieces takes n decoder steps: that
// sentences join a running stream at the next step and leave it as they finish, the stream's capacity, that
// other search settings wait for the stream to drain, failures, and that every result returns to its request.
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
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

std::string stream_text(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ".") + std::to_string(id);
  return s;
}

// What the toy streams saw, shared by all of them.
struct StreamLog {
  std::mutex mutex;
  std::vector<SearchOptions> opened;  // settings of each stream, in order
  size_t largest = 0;                  // most sentences in a stream at one step
  std::atomic<int> steps{0};
  std::chrono::milliseconds step_time{1};
  std::atomic<bool> fail_next_step{false};
  size_t removed = 0;  // sentences removed from streams
};

class ToyStream : public DecodingStream {
 public:
  ToyStream(StreamLog& log, const SearchOptions& s) : log_(log), settings_(s) {}
  void add(const std::vector<std::vector<int>>& sources, const std::vector<int64_t>& ids) override {
    for (size_t i = 0; i < sources.size(); ++i) live_[ids[i]] = {sources[i], static_cast<int>(sources[i].size())};
  }
  std::vector<std::pair<int64_t, std::vector<Translation>>> step() override {
    std::this_thread::sleep_for(log_.step_time);
    if (log_.fail_next_step.exchange(false)) throw std::runtime_error("toy failure");
    {
      std::lock_guard<std::mutex> lock(log_.mutex);
      log_.largest = std::max(log_.largest, live_.size());
    }
    ++log_.steps;
    std::vector<std::pair<int64_t, std::vector<Translation>>> done;
    for (auto it = live_.begin(); it != live_.end();) {
      if (--it->second.left == 0) {
        std::vector<Translation> nbest;
        for (int k = 0; k < settings_.n_best; ++k)
          nbest.push_back({stream_text(it->second.source), 0.f, it->second.source.size()});
        done.emplace_back(it->first, nbest);
        it = live_.erase(it);
      } else {
        ++it;
      }
    }
    return done;
  }
  void remove(const std::vector<int64_t>& ids) override {
    std::lock_guard<std::mutex> lock(log_.mutex);
    for (int64_t id : ids) log_.removed += live_.erase(id);
  }
  size_t size() const override { return live_.size(); }

 private:
  struct Sentence {
    std::vector<int> source;
    int left;
  };
  StreamLog& log_;
  SearchOptions settings_;
  std::map<int64_t, Sentence> live_;
};

StreamOpener toy_opener(StreamLog& log) {
  return [&log](const SearchOptions& s) -> std::unique_ptr<DecodingStream> {
    {
      std::lock_guard<std::mutex> lock(log.mutex);
      log.opened.push_back(s);
    }
    return std::make_unique<ToyStream>(log, s);
  };
}

// A sentence that takes `steps` decoder steps, tagged so that a misrouted result shows.
std::vector<int> sentence_of(int tag, int steps) {
  std::vector<int> s(static_cast<size_t>(steps), 7);
  s[0] = tag;
  return s;
}

void check_answered(const std::shared_ptr<Ticket>& t, const std::vector<std::vector<int>>& sources) {
  REQUIRE(t->wait_for(10000ms));
  REQUIRE(t->failure().empty());
  REQUIRE(t->results().size() == sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    REQUIRE_FALSE(t->results()[i].empty());
    CHECK(t->results()[i][0].text == stream_text(sources[i]));
  }
}

}  // namespace

TEST_CASE("continuous batching: a short sentence joins a long one's running batch and finishes first",
          "[continuous]") {
  StreamLog log;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.max_wait_ms = 0;
  SentenceBatcher batcher(limits, toy_opener(log));
  std::vector<std::vector<int>> long_one{sentence_of(1, 400)}, short_one{sentence_of(2, 3)};
  auto slow = batcher.submit(long_one, search_with(5, 1));
  while (log.steps < 5) std::this_thread::sleep_for(1ms);
  auto quick = batcher.submit(short_one, search_with(5, 1));
  check_answered(quick, short_one);
  CHECK_FALSE(slow->wait_for(0ms));  // the long sentence is still decoding
  check_answered(slow, long_one);
  std::lock_guard<std::mutex> lock(log.mutex);
  CHECK(log.opened.size() == 1);  // one stream: the short sentence joined it
  CHECK(log.largest == 2);
}

TEST_CASE("continuous batching: the stream never holds more than batch_size sentences, and every result returns "
          "to its request", "[continuous]") {
  StreamLog log;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.batch_size = 4;
  limits.max_wait_ms = 1;
  SentenceBatcher batcher(limits, toy_opener(log));
  std::vector<std::vector<std::vector<int>>> requests;
  std::vector<std::shared_ptr<Ticket>> tickets;
  for (int r = 0; r < 12; ++r) {
    std::vector<std::vector<int>> req;
    for (int i = 0; i <= r % 3; ++i) req.push_back(sentence_of(100 * r + i, 2 + (r * 7 + i) % 9));
    requests.push_back(req);
    tickets.push_back(batcher.submit(req, search_with(3, 2)));
  }
  for (size_t r = 0; r < requests.size(); ++r) check_answered(tickets[r], requests[r]);
  std::lock_guard<std::mutex> lock(log.mutex);
  CHECK(log.largest <= 4);
  CHECK(log.largest >= 3);
}

TEST_CASE("continuous batching: a request with other settings waits for the stream to drain, and later requests "
          "do not jump ahead of it", "[continuous]") {
  StreamLog log;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.max_wait_ms = 0;
  SentenceBatcher batcher(limits, toy_opener(log));
  std::vector<std::vector<int>> a{sentence_of(1, 60)}, b{sentence_of(2, 2)}, c{sentence_of(3, 2)};
  auto ta = batcher.submit(a, search_with(5, 1));
  while (log.steps < 2) std::this_thread::sleep_for(1ms);
  auto tb = batcher.submit(b, search_with(2, 1));
  std::this_thread::sleep_for(5ms);
  auto tc = batcher.submit(c, search_with(5, 1));  // same settings as the running stream, but b is older
  check_answered(ta, a);
  check_answered(tb, b);
  check_answered(tc, c);
  std::lock_guard<std::mutex> lock(log.mutex);
  REQUIRE(log.opened.size() == 3);
  CHECK(log.opened[0].beam_size == 5);
  CHECK(log.opened[1].beam_size == 2);
  CHECK(log.opened[2].beam_size == 5);
  CHECK(log.largest == 1);
}

TEST_CASE("continuous batching: a failing step fails the sentences in the stream with the reason, and the next "
          "request is served", "[continuous]") {
  StreamLog log;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.max_wait_ms = 0;
  SentenceBatcher batcher(limits, toy_opener(log));
  log.fail_next_step = true;
  std::vector<std::vector<int>> a{sentence_of(1, 5), sentence_of(2, 3)}, b{sentence_of(3, 4)};
  auto ta = batcher.submit(a, search_with(5, 1));
  REQUIRE(ta->wait_for(5000ms));
  CHECK(ta->failure() == "toy failure");
  auto tb = batcher.submit(b, search_with(5, 1));
  check_answered(tb, b);
}

TEST_CASE("continuous batching: stopping fails what is still decoding or waiting", "[continuous]") {
  StreamLog log;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.max_wait_ms = 0;
  auto batcher = std::make_unique<SentenceBatcher>(limits, toy_opener(log));
  std::vector<std::vector<int>> a{sentence_of(1, 100000)};
  auto ta = batcher->submit(a, search_with(5, 1));
  while (log.steps < 2) std::this_thread::sleep_for(1ms);
  batcher->stop();
  REQUIRE(ta->wait_for(1000ms));
  CHECK(ta->failure() == "the server is stopping");
}

TEST_CASE("continuous batching: with join_min, waiting sentences join a running stream in groups", "[continuous]") {
  StreamLog log;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.max_wait_ms = 0;
  limits.join_min = 3;
  SentenceBatcher batcher(limits, toy_opener(log));
  std::vector<std::vector<int>> long_one{sentence_of(1, 300)};
  auto slow = batcher.submit(long_one, search_with(5, 1));
  while (log.steps < 3) std::this_thread::sleep_for(1ms);
  std::vector<std::vector<int>> b{sentence_of(2, 2)}, c{sentence_of(3, 2)}, d{sentence_of(4, 2)};
  auto tb = batcher.submit(b, search_with(5, 1));
  auto tc = batcher.submit(c, search_with(5, 1));
  std::this_thread::sleep_for(30ms);  // many steps: two waiting sentences are fewer than join_min
  CHECK_FALSE(tb->wait_for(0ms));
  CHECK_FALSE(tc->wait_for(0ms));
  auto td = batcher.submit(d, search_with(5, 1));  // the third: all three join at once
  check_answered(tb, b);
  check_answered(tc, c);
  check_answered(td, d);
  CHECK_FALSE(slow->wait_for(0ms));
  check_answered(slow, long_one);
  std::lock_guard<std::mutex> lock(log.mutex);
  CHECK(log.opened.size() == 1);
  CHECK(log.largest == 4);
}

TEST_CASE("continuous batching: a cancelled request's sentences leave the stream at the next step", "[continuous]") {
  StreamLog log;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.max_wait_ms = 0;
  ServerMetrics metrics;
  SentenceBatcher batcher(limits, toy_opener(log), &metrics);
  std::vector<std::vector<int>> gone{sentence_of(1, 100000), sentence_of(2, 100000)}, stays{sentence_of(3, 20)};
  auto t_gone = batcher.submit(gone, search_with(5, 1));
  auto t_stays = batcher.submit(stays, search_with(5, 1));
  while (log.steps < 2) std::this_thread::sleep_for(1ms);
  t_gone->cancel();
  check_answered(t_stays, stays);
  for (int i = 0; i < 1000; ++i) {
    {
      std::lock_guard<std::mutex> lock(log.mutex);
      if (log.removed == 2) break;
    }
    std::this_thread::sleep_for(1ms);
  }
  std::lock_guard<std::mutex> lock(log.mutex);
  CHECK(log.removed == 2);
  CHECK_THAT(metrics.render(), Catch::Contains("parla_dropped_sentences_total 2"));
}

TEST_CASE("continuous batching: at its deadline a request is answered and its sentences leave the running search",
          "[continuous]") {
  StreamLog log;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.max_wait_ms = 0;
  SentenceBatcher batcher(limits, toy_opener(log));
  // Two sentences that would take 100,000 steps each (100 s), and one of 20 steps that finishes in time.
  std::vector<std::vector<int>> endless{sentence_of(1, 100000), sentence_of(2, 100000), sentence_of(3, 20)};
  const auto start = SentenceBatcher::Clock::now();
  auto t = batcher.submit(endless, search_with(5, 1), start + 200ms);
  REQUIRE(t->wait_for(5000ms));
  const double took = std::chrono::duration<double>(SentenceBatcher::Clock::now() - start).count();
  CHECK(t->expired());
  CHECK(took >= 0.2);
  CHECK(took < 0.5);
  // The short sentence was delivered before the deadline, the endless ones were not.
  const auto done = t->delivered();
  CHECK(done == std::vector<bool>{false, false, true});
  CHECK(t->results()[2][0].text == stream_text(endless[2]));
  for (int i = 0; i < 1000; ++i) {
    {
      std::lock_guard<std::mutex> lock(log.mutex);
      if (log.removed == 2) break;
    }
    std::this_thread::sleep_for(1ms);
  }
  {
    std::lock_guard<std::mutex> lock(log.mutex);
    CHECK(log.removed == 2);
  }
  // The search stopped working for it: no more steps once the stream is empty.
  std::this_thread::sleep_for(20ms);
  const int steps = log.steps;
  std::this_thread::sleep_for(50ms);
  CHECK(log.steps == steps);
}

TEST_CASE("continuous batching with preemption: a cheap request with other settings is decoded by the static "
          "decoder between the stream's steps instead of waiting for it to drain", "[continuous]") {
  StreamLog log;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.max_wait_ms = 0;
  limits.preempt_ms = 20;
  std::atomic<int> static_batches{0};
  BatchDecoder preempting = [&](const std::vector<std::vector<int>>& sources, const SearchOptions&) {
    ++static_batches;
    std::vector<std::vector<Translation>> out;
    for (const auto& src : sources) out.push_back({Translation{stream_text(src), 0.f, src.size()}});
    return out;
  };
  SentenceBatcher batcher(limits, toy_opener(log), nullptr, preempting);
  std::vector<std::vector<int>> a{sentence_of(1, 400)}, b{sentence_of(2, 3)};
  auto ta = batcher.submit(a, search_with(5, 1));
  while (log.steps < 2) std::this_thread::sleep_for(1ms);
  auto tb = batcher.submit(b, search_with(2, 1));  // other settings: without preemption it waits ~400 steps
  check_answered(tb, b);
  CHECK_FALSE(ta->wait_for(0ms));  // answered while the stream still runs
  CHECK(static_batches.load() == 1);
  check_answered(ta, a);
  std::lock_guard<std::mutex> lock(log.mutex);
  CHECK(log.opened.size() == 1);  // no stream of its own was opened for it
}

TEST_CASE("continuous batching: sentences join a running stream only within serve.max_batch_cost", "[continuous]") {
  StreamLog log;
  BatcherLimits limits = parla::testing::plain_batcher_limits();
  limits.max_wait_ms = 0;
  const auto opts = search_with(5, 1);
  limits.max_batch_cost = 3 * sentence_cost(opts, 20);  // room for three sentences of 20 pieces
  SentenceBatcher batcher(limits, toy_opener(log));
  std::vector<std::vector<std::vector<int>>> sent;
  std::vector<std::shared_ptr<Ticket>> tickets;
  for (int r = 0; r < 8; ++r) {
    sent.push_back({sentence_of(r, 20)});
    tickets.push_back(batcher.submit(sent.back(), opts));
  }
  for (int r = 0; r < 8; ++r) check_answered(tickets[static_cast<size_t>(r)], sent[static_cast<size_t>(r)]);
  std::lock_guard<std::mutex> lock(log.mutex);
  CHECK(log.largest == 3);
}

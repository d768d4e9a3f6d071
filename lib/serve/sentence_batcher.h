#pragma once
// Cross-request batching for parla-serve: every sentence of every request enters one queue, and one decoding
// thread forms batches from everything waiting that shares the same search options (a request may set beam size
// and n-best), so that 64 clients sending one sentence each are decoded as one batch of 64 rather than 64 batches
// of one. Batched beam search gives each sentence the same result whatever its batch (tests/decode), so batching
// never changes an answer. Torch-free: the decoder is a function (the app passes decode::Translator's).
//
// A batch is decoded when it is full (batch_size sentences, or batch_tokens padded source tokens) or when the oldest
// waiting sentence has waited max_wait_ms, counted from the end of the previous batch if that is later: the clients a
// batch has just answered get max_wait_ms to send their next sentences. Without that pause, 64 clients that each send a
// sentence when answered split into two alternating half batches (the sentences that came in during one batch form the
// next one at once, before the ones it answered are back), and the server decoded far fewer sentences per second than
// the thread-per-connection one it replaced (issue 36; docs/BENCHMARKS.md, "Figures behind the code's choices"). A
// batch takes sentences round-robin (one from each waiting request in turn, each request's longest first), the least
// served requests first (fewest sentences taken, then arrival order), and its options are those of the least served
// request: so a request of a thousand lines, or a hundred long requests, do not hold back a one-line request that
// arrives after them: the small one joins the next batch (issue 59). Within a request, sentences of similar length end
// up in the same batch, which keeps padding low.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/config/serve_config.h"
#include "decode/search_options.h"
#include "serve/translate_request.h"

namespace parla::serve {

class ServerMetrics;

// What every sentence of one batch is searched with (the server's options with a request's beam size and n-best):
// only sentences whose options are equal share a batch.
using SearchOptions = decode::SearchOptions;

// Decodes one batch: source piece ids (no EOS; never empty) -> each sentence's n-best translations, best first.
using BatchDecoder = std::function<std::vector<std::vector<Translation>>(const std::vector<std::vector<int>>& sources,
                                                                          const SearchOptions& options)>;

// Continuous batching (decode::TranslationStream behind it): a running search that sentences join between
// decoder steps and leave as they finish. Used by the decoding thread only.
class DecodingStream {
 public:
  virtual ~DecodingStream() = default;
  // Sources as for BatchDecoder; `ids` name them in step()'s results.
  virtual void add(const std::vector<std::vector<int>>& sources, const std::vector<int64_t>& ids) = 0;
  // One decoder step: the sentences that finished at it, with their n-best translations.
  virtual std::vector<std::pair<int64_t, std::vector<Translation>>> step() = 0;
  // Drops sentences from the stream between steps (their request was cancelled).
  virtual void remove(const std::vector<int64_t>& ids) = 0;
  // Sentences being decoded.
  virtual size_t size() const = 0;
};
using StreamOpener = std::function<std::unique_ptr<DecodingStream>(const SearchOptions& options)>;

// Any class with the same four members (decode::TranslationStream) as a DecodingStream.
template <class Stream>
std::unique_ptr<DecodingStream> as_decoding_stream(std::unique_ptr<Stream> stream) {
  struct Adapter : DecodingStream {
    std::unique_ptr<Stream> s;
    void add(const std::vector<std::vector<int>>& sources, const std::vector<int64_t>& ids) override {
      s->add(sources, ids);
    }
    std::vector<std::pair<int64_t, std::vector<Translation>>> step() override { return s->step(); }
    void remove(const std::vector<int64_t>& ids) override { s->remove(ids); }
    size_t size() const override { return s->size(); }
  };
  auto a = std::make_unique<Adapter>();
  a->s = std::move(stream);
  return a;
}

// The serve section's batching keys (their defaults are the config's: from_config is the way to make one).
struct BatcherLimits {
  size_t batch_size{};       // sentences per batch
  size_t batch_tokens{};     // padded source tokens per batch (EOS included); 0 = no token budget
  double max_wait_ms{};      // the wait (from the oldest sentence's arrival or the last batch's end, whichever is
                             // later) before a batch that is not full is decoded anyway
  size_t batch_requests{};   // requests per batch; 0 = any
  size_t join_min{};         // continuous: sentences that join a running stream together (or all it has room for)
  size_t max_queue{};        // sentences waiting; submit() refuses a request that would exceed it
  double max_queued_cost{};  // decoding cost waiting (sentence_cost summed); submit() refuses beyond; 0 = any
  double preempt_ms{};       // a batch that has decoded this long lets cheaper sentences go first; 0 = never
  double max_batch_cost{};   // sentence_cost summed over a batch (a sentence alone beyond forms a batch); 0 = any

  static BatcherLimits from_config(const ServeConfig& serve);
};

// What one sentence may cost to decode, the unit of serve.max_queued_cost: beam size x the output tokens its
// search allows (floor(max_length_factor x source tokens + max_length_offset), at least 1, as
// decode::max_output_length, without the model's position cap). A sentence that decodes to the
// length cap costs about this many decoder rows; an ordinary one stops far earlier.
double sentence_cost(const SearchOptions& options, size_t source_tokens);

// One request's sentences in the queue. The handler thread waits on it; the decoding thread fills it.
class Ticket {
 public:
  explicit Ticket(size_t sentences) : results_(sentences), remaining_(sentences), delivered_(sentences) {}
  // True once every sentence has its result, or the ticket failed; waits at most `timeout`.
  bool wait_for(std::chrono::milliseconds timeout);
  // Calls `done` once, when the ticket is done or failed (at once, in this thread, if it already is; otherwise in
  // the decoding thread, which must not be held up: post the work elsewhere). The event-driven HTTP server waits
  // this way, without a thread per request. A cancelled ticket drops its callback uncalled, so that a callback
  // that owns the ticket's holder does not keep both alive.
  void on_done(std::function<void()> done);
  // The client is gone: sentences not yet in a batch are dropped from the queue, results are discarded.
  void cancel();
  // True when cancelled or expired: the batcher drops its sentences.
  bool cancelled() const;
  // The request's deadline ran out (serve.request_timeout_s): the ticket is done with the results it has, its
  // sentences still waiting or decoding are dropped, and later results are discarded.
  void expire();
  bool expired() const;
  // Which sentences have their result (all of them unless expired or failed).
  std::vector<bool> delivered() const;
  // Empty unless the work failed (the decoder threw, or the server stopped before it was done).
  std::string failure() const;
  const std::vector<std::vector<Translation>>& results() const { return results_; }

 private:
  friend class SentenceBatcher;
  void deliver(size_t index, std::vector<Translation> result);
  void fail(const std::string& why);
  // Under the lock: the callback to run (after unlocking) if the ticket has just become done.
  std::function<void()> take_callback_if_done();
  bool done_locked() const { return remaining_ == 0 || !failure_.empty() || expired_; }

  mutable std::mutex mutex_;
  std::condition_variable done_;
  std::vector<std::vector<Translation>> results_;
  size_t remaining_;
  bool cancelled_ = false;
  bool expired_ = false;
  std::vector<bool> delivered_;
  std::string failure_;
  std::function<void()> on_done_;
};

class SentenceBatcher {
 public:
  using Clock = std::chrono::steady_clock;
  // `metrics` may be null. The decoding thread starts at once.
  SentenceBatcher(const BatcherLimits& limits, BatchDecoder decoder, ServerMetrics* metrics = nullptr);
  // Continuous batching: when nothing is decoding, a batch is formed as above and a stream opened for it;
  // while it decodes, sentences waiting with the same options join it at the next step, up to batch_size
  // sentences in the stream (no wait: a free place is filled at once). When the oldest waiting request has
  // other options, nothing joins any more: the stream drains and the next one serves that request. The
  // sentences of a cancelled request leave the stream at the next step.
  // In the metrics a batch is then one decoder step. With `preempting`, cheap sentences may be decoded by it
  // between two steps of the stream (limits.preempt_ms), as a static batch preempts.
  SentenceBatcher(const BatcherLimits& limits, StreamOpener opener, ServerMetrics* metrics = nullptr,
                  BatchDecoder preempting = {});
  ~SentenceBatcher();
  SentenceBatcher(const SentenceBatcher&) = delete;
  SentenceBatcher& operator=(const SentenceBatcher&) = delete;

  // Queues one request's sentences (piece ids; an empty one is answered at once with an empty translation).
  // Returns null, queueing nothing, when the queue cannot take them all (the caller answers 503; `refused`, when
  // given, says which limit). At `deadline` the ticket expires (Ticket::expire), whatever the decoder is doing.
  std::shared_ptr<Ticket> submit(std::vector<std::vector<int>> sources, const SearchOptions& options,
                                 Clock::time_point deadline = Clock::time_point::max(),
                                 std::string* refused = nullptr);

  // Fails every sentence still waiting (not yet in a batch) with `why`: the drain timeout ran out.
  void fail_waiting(const std::string& why);
  // Stops the decoding thread after the batch it is decoding; what still waits fails with "server stopping".
  void stop();

  size_t waiting() const;
  // The decoding cost waiting (sentence_cost of every sentence not yet in a batch).
  double queued_cost() const;
  // An estimate of the seconds of decoding waiting: the longest of the oldest waiting request's wait, the time the
  // static batch being decoded has run, and the queued cost at the cost per second measured so far. /health reports degraded beyond serve.health_max_queued_s.
  double queued_seconds() const;

 private:
  struct Entry {
    std::shared_ptr<Ticket> ticket;
    SearchOptions options;
    std::vector<std::vector<int>> sources;
    std::vector<size_t> order;  // order[next..]: sentences not yet taken, longest first
    size_t next = 0;
    Clock::time_point arrived;
  };
  struct Item {
    std::shared_ptr<Ticket> ticket;
    size_t index;
  };

  void run();
  void run_continuous();
  // Decodes one batch taken from the queue (lock not held) and delivers its results. `depth` counts the batches
  // it preempts (0 for one the decoding loop took). Between its decoder steps the batch stops when every one of
  // its requests is cancelled, and lets cheaper sentences go first (maybe_preempt).
  void decode_batch(std::vector<Item> items, std::vector<std::vector<int>> sources, const SearchOptions& options,
                    int depth);
  // Preemption (limits_.preempt_ms; lock not held): when the running work (whose costliest sentence costs
  // `max_cost`, all of it `batch_cost`) has decoded for preempt_ms since `slice_start`, decodes a batch of waiting
  // sentences of cost at most max_cost / 4 each and batch_cost / 4 together now, and restarts the slice.
  void maybe_preempt(double max_cost, double batch_cost, Clock::time_point& slice_start, int depth);
  // limits_.max_batch_cost, or kAnyCost.
  double batch_cost_budget() const;
  // The deadline thread: expires tickets as their deadlines pass.
  void run_deadlines();
  // Under the lock: the queue depth and cost to the metrics.
  void publish_queue();
  // Under the lock, queue_ not empty: the request whose options the next batch has, the least served (fewest
  // sentences taken) and among those the oldest, so that a new request's first sentence is in the next batch.
  // Only requests with a sentence of cost at most `max_cost` waiting count (null when there is none).
  const Entry* leader(double max_cost = kAnyCost) const;
  // The position in e.order (>= e.next) of the longest sentence not yet taken that costs at most `max_cost`, or
  // e.order.size().
  size_t next_fitting(const Entry& e, double max_cost) const;
  // Under the lock: the cost of the sentences of `e` not yet taken.
  double entry_cost(const Entry& e) const;
  // Under the lock: drops the entries of cancelled tickets.
  void drop_cancelled();
  // Under the lock: drops cancelled entries; true when a batch should be decoded now, else sets `wake`.
  bool batch_ready(Clock::time_point now, Clock::time_point& wake);
  // Under the lock: true when a batch should be decoded now; otherwise waits (releasing the lock) until the
  // oldest sentence's deadline or a wake-up, and returns false so that the caller checks again.
  bool wait_for_batch(std::unique_lock<std::mutex>& lock);
  // Under the lock: takes the next batch of at most `capacity` sentences (round-robin over the requests with
  // the oldest entry's options), only of sentences that cost at most `max_cost`, together at most `cost_budget`
  // (unless one sentence alone exceeds it and `alone_may_exceed`).
  std::vector<Item> take_batch(std::vector<std::vector<int>>& sources, SearchOptions& options, size_t capacity,
                               double max_cost = kAnyCost, double cost_budget = kAnyCost,
                               bool alone_may_exceed = true);
  static constexpr double kAnyCost = 1e300;

  BatcherLimits limits_;
  BatchDecoder decoder_;
  StreamOpener opener_;
  ServerMetrics* metrics_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::list<Entry> queue_;  // arrival order
  size_t waiting_ = 0;      // sentences in queue_ not yet taken
  double queued_cost_ = 0;  // their sentence_cost
  double decoded_cost_ = 0, decoding_seconds_ = 0;  // measured: the cost decoded and the time it took
  std::multimap<Clock::time_point, std::weak_ptr<Ticket>> deadlines_;
  std::condition_variable deadline_wake_;
  std::thread deadline_worker_;
  Clock::time_point batch_started_{};  // static batching: when the batch being decoded started ({} = none)
  Clock::time_point last_batch_end_{};  // static batching: when the last batch's answers were delivered
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace parla::serve

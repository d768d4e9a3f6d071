#include "serve/sentence_batcher.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "decode/between_steps.h"
#include "serve/server_metrics.h"

namespace parla::serve {

BatcherLimits BatcherLimits::from_config(const ServeConfig& serve) {
  BatcherLimits b;
  b.batch_size = static_cast<size_t>(serve.batch_size);
  b.batch_tokens = static_cast<size_t>(serve.batch_tokens);
  b.max_wait_ms = serve.max_wait_ms;
  b.batch_requests = static_cast<size_t>(serve.batch_requests);
  b.join_min = static_cast<size_t>(serve.join_min);
  b.max_queue = static_cast<size_t>(serve.max_queue);
  b.max_queued_cost = serve.max_queued_cost;
  b.preempt_ms = serve.preempt_ms;
  b.max_batch_cost = serve.max_batch_cost;
  return b;
}
namespace {

// The summed and the largest sentence_cost of a batch or a stream: its memory and its duration.
struct CostSummary {
  double total = 0, costliest = 0;
  void add(double c) {
    total += c;
    costliest = std::max(costliest, c);
  }
};

}  // namespace

bool Ticket::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return done_.wait_for(lock, timeout, [&] { return done_locked(); });
}

void Ticket::on_done(std::function<void()> done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!done_locked()) {
      if (!cancelled_) on_done_ = std::move(done);
      return;
    }
  }
  done();
}

std::function<void()> Ticket::take_callback_if_done() {
  std::function<void()> f;
  if (done_locked()) f.swap(on_done_);
  return f;
}

void Ticket::cancel() {
  std::function<void()> dropped;
  std::lock_guard<std::mutex> lock(mutex_);
  cancelled_ = true;
  dropped.swap(on_done_);  // destroyed after the lock is released (declared first)
}

bool Ticket::cancelled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cancelled_ || expired_;
}

void Ticket::expire() {
  std::function<void()> callback;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_locked()) return;
    expired_ = true;
    done_.notify_all();
    callback = take_callback_if_done();
  }
  if (callback) callback();
}

bool Ticket::expired() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return expired_;
}

std::vector<bool> Ticket::delivered() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return delivered_;
}

std::string Ticket::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void Ticket::deliver(size_t index, std::vector<Translation> result) {
  std::function<void()> callback;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Once expired the ticket is answered from results_ without the lock: nothing may change it any more.
    if (expired_ || delivered_[index]) return;
    results_[index] = std::move(result);
    delivered_[index] = true;
    if (--remaining_ == 0) done_.notify_all();
    callback = take_callback_if_done();
  }
  if (callback) callback();
}

void Ticket::fail(const std::string& why) {
  std::function<void()> callback;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (expired_) return;
    if (failure_.empty()) failure_ = why;
    done_.notify_all();
    callback = take_callback_if_done();
  }
  if (callback) callback();
}

SentenceBatcher::SentenceBatcher(const BatcherLimits& limits, BatchDecoder decoder, ServerMetrics* metrics)
    : limits_(limits), decoder_(std::move(decoder)), metrics_(metrics) {
  limits_.batch_size = std::max<size_t>(1, limits_.batch_size);
  worker_ = std::thread([this] { run(); });
  deadline_worker_ = std::thread([this] { run_deadlines(); });
}

SentenceBatcher::SentenceBatcher(const BatcherLimits& limits, StreamOpener opener, ServerMetrics* metrics,
                                 BatchDecoder preempting)
    : limits_(limits), decoder_(std::move(preempting)), opener_(std::move(opener)), metrics_(metrics) {
  limits_.batch_size = std::max<size_t>(1, limits_.batch_size);
  worker_ = std::thread([this] { run_continuous(); });
  deadline_worker_ = std::thread([this] { run_deadlines(); });
}

SentenceBatcher::~SentenceBatcher() { stop(); }

double sentence_cost(const SearchOptions& options, size_t source_tokens) {
  // decode::max_output_length's formula (decode/ is not torch-free, so not called from here).
  const double length = std::floor(options.max_length_factor * static_cast<double>(source_tokens) +
                                   options.max_length_offset);
  return static_cast<double>(std::max(1, options.beam_size)) * std::max(1.0, length);
}

double SentenceBatcher::entry_cost(const Entry& e) const {
  double cost = 0;
  for (size_t k = e.next; k < e.order.size(); ++k) cost += sentence_cost(e.options, e.sources[e.order[k]].size());
  return cost;
}

void SentenceBatcher::publish_queue() {
  if (!metrics_) return;
  metrics_->set_queue(waiting_);
  metrics_->set_queued_cost(queued_cost_);
}

std::shared_ptr<Ticket> SentenceBatcher::submit(std::vector<std::vector<int>> sources,
                                                const SearchOptions& options, Clock::time_point deadline,
                                                std::string* refused) {
  auto ticket = std::make_shared<Ticket>(sources.size());
  Entry e;
  e.options = options;
  e.arrived = Clock::now();
  for (size_t i = 0; i < sources.size(); ++i)
    if (!sources[i].empty()) e.order.push_back(i);
  // Longest first, ties by position: the same order plan_batches uses for parla-translate.
  std::stable_sort(e.order.begin(), e.order.end(),
                   [&](size_t a, size_t b) { return sources[a].size() > sources[b].size(); });
  const size_t queued = e.order.size();
  double cost = 0;
  for (size_t i : e.order) cost += sentence_cost(options, sources[i].size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
      if (refused) *refused = "the server is stopping";
      return nullptr;
    }
    if (waiting_ + queued > limits_.max_queue) {
      if (refused)
        *refused = "the queue holds its limit of " + std::to_string(limits_.max_queue) + " sentences (serve.max_queue)";
      return nullptr;
    }
    if (limits_.max_queued_cost > 0 && queued_cost_ + cost > limits_.max_queued_cost) {
      if (refused)
        *refused = "the request's decoding cost " + std::to_string(static_cast<int64_t>(cost)) +
                   " would take the queued cost past its limit of " +
                   std::to_string(static_cast<int64_t>(limits_.max_queued_cost)) + " (serve.max_queued_cost; " +
                   std::to_string(static_cast<int64_t>(queued_cost_)) + " queued)";
      return nullptr;
    }
    // An empty line is answered at once with an empty translation, as parla-translate prints an empty line.
    for (size_t i = 0; i < sources.size(); ++i)
      if (sources[i].empty()) ticket->deliver(i, {Translation{}});
    if (queued == 0) return ticket;
    e.ticket = ticket;
    e.sources = std::move(sources);
    queue_.push_back(std::move(e));
    waiting_ += queued;
    queued_cost_ += cost;
    publish_queue();
    if (deadline != Clock::time_point::max()) {
      const bool earliest = deadlines_.empty() || deadline < deadlines_.begin()->first;
      deadlines_.emplace(deadline, ticket);
      if (earliest) deadline_wake_.notify_one();
    }
  }
  wake_.notify_one();
  return ticket;
}

double SentenceBatcher::queued_cost() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queued_cost_;
}

double SentenceBatcher::queued_seconds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  double seconds = 0;
  const auto now = Clock::now();
  if (!queue_.empty()) seconds = std::chrono::duration<double>(now - queue_.front().arrived).count();
  // A static batch of long sentences can decode for a minute with nothing waiting: a request sent now waits too.
  if (batch_started_ != Clock::time_point{})
    seconds = std::max(seconds, std::chrono::duration<double>(now - batch_started_).count());
  if (decoded_cost_ > 0 && decoding_seconds_ > 0)
    seconds = std::max(seconds, queued_cost_ * decoding_seconds_ / decoded_cost_);
  return seconds;
}

void SentenceBatcher::run_deadlines() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (deadlines_.empty()) {
      deadline_wake_.wait(lock);
      continue;
    }
    const auto first = deadlines_.begin()->first;
    if (Clock::now() < first) {
      deadline_wake_.wait_until(lock, first);
      continue;
    }
    std::vector<std::shared_ptr<Ticket>> due;
    const auto now = Clock::now();
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      if (auto t = deadlines_.begin()->second.lock()) due.push_back(std::move(t));
      deadlines_.erase(deadlines_.begin());
    }
    lock.unlock();
    // Outside the batcher's lock: expiring runs the ticket's callback.
    for (auto& t : due) t->expire();
    lock.lock();
    // The decoding thread drops the expired requests' waiting sentences (and, continuous, those in the stream).
    wake_.notify_all();
  }
}

size_t SentenceBatcher::waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waiting_;
}

void SentenceBatcher::fail_waiting(const std::string& why) {
  std::list<Entry> failed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    failed.swap(queue_);
    waiting_ = 0;
    queued_cost_ = 0;
    publish_queue();
  }
  for (auto& e : failed) e.ticket->fail(why);
}

void SentenceBatcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && !worker_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  deadline_wake_.notify_all();
  if (worker_.joinable()) worker_.join();
  if (deadline_worker_.joinable()) deadline_worker_.join();
  fail_waiting("the server is stopping");
}

void SentenceBatcher::drop_cancelled() {
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->ticket->cancelled()) {
      const size_t left = it->order.size() - it->next;
      waiting_ -= left;
      queued_cost_ = std::max(0.0, queued_cost_ - entry_cost(*it));
      if (metrics_) metrics_->sentences_dropped(left);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  publish_queue();
}

bool SentenceBatcher::batch_ready(Clock::time_point now, Clock::time_point& wake) {
  drop_cancelled();
  if (queue_.empty()) return false;
  const auto& oldest = queue_.front();
  const auto deadline =
      std::max(oldest.arrived, last_batch_end_) +
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(limits_.max_wait_ms));
  if (now >= deadline) return true;
  // Full: enough sentences with the next batch's options to fill the sentence or token budget.
  const auto& options = leader()->options;
  size_t sentences = 0, tokens = 0, requests = 0;
  for (const auto& e : queue_) {
    if (!(e.options == options)) continue;
    if (limits_.batch_requests > 0 && requests == limits_.batch_requests) break;
    ++requests;
    for (size_t k = e.next; k < e.order.size(); ++k) {
      ++sentences;
      tokens += e.sources[e.order[k]].size() + 1;
    }
  }
  if (sentences >= limits_.batch_size || (limits_.batch_tokens > 0 && tokens >= limits_.batch_tokens)) return true;
  wake = deadline;
  return false;
}

std::vector<SentenceBatcher::Item> SentenceBatcher::take_batch(std::vector<std::vector<int>>& sources,
                                                               SearchOptions& options, size_t capacity,
                                                               double max_cost, double cost_budget,
                                                               bool alone_may_exceed) {
  const Entry* lead = leader(max_cost);
  if (!lead) return {};
  options = lead->options;
  // The requests this batch draws from: the least served first (fewest sentences taken), then in arrival order.
  // In arrival order alone, a batch of 64 took one sentence from each of the first 64 long requests, again and
  // again, and a one-line request behind them waited until they were done (issue 59).
  std::vector<Entry*> members;
  for (auto& e : queue_)
    if (e.options == options && next_fitting(e, max_cost) < e.order.size()) members.push_back(&e);
  std::stable_sort(members.begin(), members.end(), [](const Entry* a, const Entry* b) { return a->next < b->next; });
  if (limits_.batch_requests > 0 && members.size() > limits_.batch_requests) members.resize(limits_.batch_requests);
  std::vector<Item> items;
  size_t longest = 0;
  double batch_cost = 0;
  // Round-robin: one sentence from each member in turn until the budget is met or nothing fits.
  for (bool added = true; added && items.size() < capacity;) {
    added = false;
    for (Entry* e : members) {
      if (items.size() == capacity) break;
      const size_t k = next_fitting(*e, max_cost);
      if (k == e->order.size()) continue;
      const size_t index = e->order[k];
      const size_t length = e->sources[index].size() + 1;  // + EOS
      const size_t padded = std::max(longest, length) * (items.size() + 1);
      // A sentence that alone exceeds the token budget still forms a batch of its own.
      if (limits_.batch_tokens > 0 && padded > limits_.batch_tokens && !items.empty()) continue;
      // Decoding memory grows with the batch's cost (rows x the positions they may reach): bounded the same way.
      const double cost = sentence_cost(e->options, e->sources[index].size());
      if (batch_cost + cost > cost_budget && (!items.empty() || !alone_may_exceed)) continue;
      batch_cost += cost;
      longest = std::max(longest, length);
      queued_cost_ = std::max(0.0, queued_cost_ - cost);
      sources.push_back(std::move(e->sources[index]));
      items.push_back({e->ticket, index});
      // The taken sentence moves to the front of what is left (which stays longest first) and is passed.
      std::rotate(e->order.begin() + static_cast<std::ptrdiff_t>(e->next),
                  e->order.begin() + static_cast<std::ptrdiff_t>(k),
                  e->order.begin() + static_cast<std::ptrdiff_t>(k + 1));
      ++e->next;
      --waiting_;
      added = true;
    }
  }
  queue_.remove_if([](const Entry& e) { return e.next == e.order.size(); });
  if (queue_.empty()) queued_cost_ = 0;  // no drift from rounding
  publish_queue();
  return items;
}

size_t SentenceBatcher::next_fitting(const Entry& e, double max_cost) const {
  if (max_cost >= kAnyCost) return e.next;
  for (size_t k = e.next; k < e.order.size(); ++k)
    if (sentence_cost(e.options, e.sources[e.order[k]].size()) <= max_cost) return k;
  return e.order.size();
}

const SentenceBatcher::Entry* SentenceBatcher::leader(double max_cost) const {
  const Entry* best = nullptr;
  for (const auto& e : queue_)
    if ((!best || e.next < best->next) && next_fitting(e, max_cost) < e.order.size()) best = &e;
  return best;
}

bool SentenceBatcher::wait_for_batch(std::unique_lock<std::mutex>& lock) {
  auto wake = Clock::time_point::max();
  if (batch_ready(Clock::now(), wake)) return true;
  if (wake == Clock::time_point::max()) {
    wake_.wait(lock);
  } else {
    wake_.wait_until(lock, wake);
  }
  return false;
}

void SentenceBatcher::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (stopping_) return;
    if (!wait_for_batch(lock)) continue;
    std::vector<std::vector<int>> sources;
    SearchOptions options;
    auto items = take_batch(sources, options, limits_.batch_size, kAnyCost, batch_cost_budget());
    batch_started_ = Clock::now();
    lock.unlock();
    decode_batch(std::move(items), std::move(sources), options, 0);
    lock.lock();
    last_batch_end_ = Clock::now();
    batch_started_ = Clock::time_point{};
  }
}

void SentenceBatcher::decode_batch(std::vector<Item> items, std::vector<std::vector<int>> sources,
                                   const SearchOptions& options, int depth) {
  if (items.empty()) return;
  CostSummary cost;
  for (const auto& src : sources) cost.add(sentence_cost(options, src.size()));
  const auto start = Clock::now();
  auto slice_start = start;
  std::vector<std::vector<Translation>> out;
  std::string failure;
  bool interrupted = false;
  double preempted_seconds = 0;  // spent on the batches that went first: not this batch's decoding time
  try {
    // Between decoder steps: stop when nobody waits for the answers any more; let cheaper sentences go first.
    decode::BetweenSteps hook([&] {
      if (std::all_of(items.begin(), items.end(), [](const Item& i) { return i.ticket->cancelled(); }))
        throw decode::SearchInterrupted("every request of the batch was cancelled or ran out of time");
      const auto before = Clock::now();
      maybe_preempt(cost.costliest, cost.total, slice_start, depth);
      preempted_seconds += std::chrono::duration<double>(Clock::now() - before).count();
    });
    out = decoder_(sources, options);
    if (out.size() != sources.size()) failure = "internal error: the decoder returned a wrong number of results";
  } catch (const decode::SearchInterrupted&) {
    interrupted = true;
  } catch (const std::exception& e) {
    failure = e.what();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count() - preempted_seconds;
  if (interrupted) {
    // Its requests were answered (504) or their clients left; nothing of it is delivered.
    if (metrics_) metrics_->sentences_dropped(items.size());
    return;
  }
  std::set<const Ticket*> requests;
  uint64_t source_tokens = 0, target_tokens = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    requests.insert(items[i].ticket.get());
    if (!failure.empty()) {
      items[i].ticket->fail(failure);
      continue;
    }
    source_tokens += sources[i].size();
    if (!out[i].empty()) target_tokens += out[i][0].tokens;
    items[i].ticket->deliver(items[i].index, std::move(out[i]));
  }
  if (metrics_) {
    metrics_->batch_decoded(items.size(), requests.size(), seconds);
    if (failure.empty()) metrics_->sentences_translated(items.size(), source_tokens, target_tokens);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure.empty()) {
    decoded_cost_ += cost.total;
    decoding_seconds_ += seconds;
  }
}

double SentenceBatcher::batch_cost_budget() const {
  return limits_.max_batch_cost > 0 ? limits_.max_batch_cost : kAnyCost;
}

void SentenceBatcher::maybe_preempt(double max_cost, double batch_cost, Clock::time_point& slice_start, int depth) {
  if (limits_.preempt_ms <= 0 || !decoder_) return;
  const auto slice =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(limits_.preempt_ms));
  if (Clock::now() - slice_start < slice) return;
  std::vector<std::vector<int>> sources;
  SearchOptions options;
  std::vector<Item> items;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    drop_cancelled();
    // Only much cheaper work goes first: a batch runs as long as its costliest sentence, so sentences of like
    // cost would hold this one back as long again, and each level down is at least 4x cheaper (the levels are
    // few, and their memory a fraction of this batch's).
    items = take_batch(sources, options, limits_.batch_size, max_cost / 4, batch_cost / 4);
  }
  if (items.empty()) return;
  decode_batch(std::move(items), std::move(sources), options, depth + 1);
  slice_start = Clock::now();
}

void SentenceBatcher::run_continuous() {
  std::unique_ptr<DecodingStream> stream;
  SearchOptions options;
  std::map<int64_t, Item> in_stream;  // sentences being decoded, by stream id
  std::map<int64_t, size_t> source_tokens;
  int64_t next_id = 0;
  auto slice_start = Clock::now();  // preemption: since the stream opened or last let a batch go first
  auto stream_cost = [&] {
    CostSummary c;
    for (const auto& [id, tokens] : source_tokens) c.add(sentence_cost(options, tokens));
    return c;
  };
  // Everything in the stream fails (the decoder threw, or the server stops); the stream is dropped.
  auto fail_stream = [&](const std::string& why) {
    for (auto& [id, item] : in_stream) item.ticket->fail(why);
    in_stream.clear();
    source_tokens.clear();
    stream.reset();
  };
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (stopping_) {
      lock.unlock();
      fail_stream("the server is stopping");
      return;
    }
    std::vector<std::vector<int>> sources;
    std::vector<Item> joining;
    std::vector<int64_t> leaving;  // sentences of cancelled requests
    if (in_stream.empty()) {
      if (!wait_for_batch(lock)) continue;
      joining = take_batch(sources, options, limits_.batch_size, kAnyCost, batch_cost_budget());
      stream.reset();
      slice_start = Clock::now();
    } else {
      drop_cancelled();
      for (const auto& [id, item] : in_stream)
        if (item.ticket->cancelled()) leaving.push_back(id);
      // Join at once while there is room, unless an older request waits for other options (then drain).
      if (!queue_.empty() && leader()->options == options && in_stream.size() < limits_.batch_size) {
        const size_t room = limits_.batch_size - in_stream.size();
        size_t ready = 0;
        for (const auto& e : queue_)
          if (e.options == options) ready += e.order.size() - e.next;
        if (ready >= std::min(room, std::max<size_t>(1, limits_.join_min))) {
          SearchOptions same;
          // Joiners stay within serve.max_batch_cost with the sentences already decoding.
          joining = take_batch(sources, same, room, kAnyCost, batch_cost_budget() - stream_cost().total, false);
        }
      }
    }
    lock.unlock();

    const auto start = Clock::now();
    std::vector<std::pair<int64_t, std::vector<Translation>>> finished;
    size_t rows = 0;
    std::set<const Ticket*> requests;
    if (!leaving.empty()) {
      for (int64_t id : leaving) {
        in_stream.erase(id);
        source_tokens.erase(id);
      }
      if (metrics_) metrics_->sentences_dropped(leaving.size());
    }
    try {
      if (!stream) stream = opener_(options);
      if (!leaving.empty()) stream->remove(leaving);
      if (!joining.empty()) {
        std::vector<int64_t> ids;
        for (size_t i = 0; i < joining.size(); ++i) {
          ids.push_back(next_id);
          source_tokens[next_id] = sources[i].size();
          in_stream[next_id++] = std::move(joining[i]);
        }
        stream->add(sources, ids);
      }
      rows = stream->size();
      for (const auto& [id, item] : in_stream) requests.insert(item.ticket.get());
      finished = stream->step();
    } catch (const std::exception& e) {
      fail_stream(e.what());
      lock.lock();
      continue;
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    uint64_t done = 0, src_tokens = 0, tgt_tokens = 0;
    double finished_cost = 0;
    for (auto& [id, result] : finished) {
      auto it = in_stream.find(id);
      if (it == in_stream.end()) continue;
      ++done;
      finished_cost += sentence_cost(options, source_tokens[id]);
      src_tokens += source_tokens[id];
      if (!result.empty()) tgt_tokens += result[0].tokens;
      it->second.ticket->deliver(it->second.index, std::move(result));
      in_stream.erase(it);
      source_tokens.erase(id);
    }
    if (metrics_) {
      metrics_->batch_decoded(rows, requests.size(), seconds);
      if (done > 0) metrics_->sentences_translated(done, src_tokens, tgt_tokens);
    }
    if (!in_stream.empty()) {
      // Sentences much cheaper than the stream's costliest, with other options or with no room to join, are
      // decoded as a static batch before its next step.
      const CostSummary c = stream_cost();
      maybe_preempt(c.costliest, c.total, slice_start, 0);
    }
    lock.lock();
    decoded_cost_ += finished_cost;
    decoding_seconds_ += seconds;
  }
}

}  // namespace parla::serve

#include "serve/sentence_batcher.h"

#include <algorithm>
#include <map>
#include <set>

#include "serve/server_metrics.h"

namespace parla::serve {

bool Ticket::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return done_.wait_for(lock, timeout, [&] { return remaining_ == 0 || !failure_.empty(); });
}

void Ticket::on_done(std::function<void()> done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (remaining_ != 0 && failure_.empty()) {
      if (!cancelled_) on_done_ = std::move(done);
      return;
    }
  }
  done();
}

std::function<void()> Ticket::take_callback_if_done() {
  std::function<void()> f;
  if (remaining_ == 0 || !failure_.empty()) f.swap(on_done_);
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
  return cancelled_;
}

std::string Ticket::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void Ticket::deliver(size_t index, std::vector<Translation> result) {
  std::function<void()> callback;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    results_[index] = std::move(result);
    if (--remaining_ == 0) done_.notify_all();
    callback = take_callback_if_done();
  }
  if (callback) callback();
}

void Ticket::fail(const std::string& why) {
  std::function<void()> callback;
  {
    std::lock_guard<std::mutex> lock(mutex_);
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
}

SentenceBatcher::SentenceBatcher(const BatcherLimits& limits, StreamOpener opener, ServerMetrics* metrics)
    : limits_(limits), opener_(std::move(opener)), metrics_(metrics) {
  limits_.batch_size = std::max<size_t>(1, limits_.batch_size);
  worker_ = std::thread([this] { run_continuous(); });
}

SentenceBatcher::~SentenceBatcher() { stop(); }

std::shared_ptr<Ticket> SentenceBatcher::submit(std::vector<std::vector<int>> sources,
                                                const SearchOptions& options) {
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || waiting_ + queued > limits_.max_queue) return nullptr;
    // An empty line is answered at once with an empty translation, as parla-translate prints an empty line.
    for (size_t i = 0; i < sources.size(); ++i)
      if (sources[i].empty()) ticket->deliver(i, {Translation{}});
    if (queued == 0) return ticket;
    e.ticket = ticket;
    e.sources = std::move(sources);
    queue_.push_back(std::move(e));
    waiting_ += queued;
    if (metrics_) metrics_->set_queue(waiting_);
  }
  wake_.notify_one();
  return ticket;
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
    if (metrics_) metrics_->set_queue(0);
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
  if (worker_.joinable()) worker_.join();
  fail_waiting("the server is stopping");
}

void SentenceBatcher::drop_cancelled() {
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->ticket->cancelled()) {
      const size_t left = it->order.size() - it->next;
      waiting_ -= left;
      if (metrics_) metrics_->sentences_dropped(left);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  if (metrics_) metrics_->set_queue(waiting_);
}

bool SentenceBatcher::batch_ready(Clock::time_point now, Clock::time_point& wake) {
  drop_cancelled();
  if (queue_.empty()) return false;
  const auto& oldest = queue_.front();
  const auto deadline =
      std::max(oldest.arrived, last_batch_end_) +
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(limits_.max_wait_ms));
  if (now >= deadline) return true;
  // Full: enough sentences with the oldest's options to fill the sentence or token budget.
  size_t sentences = 0, tokens = 0, requests = 0;
  for (const auto& e : queue_) {
    if (!(e.options == oldest.options)) continue;
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
                                                               SearchOptions& options, size_t capacity) {
  options = queue_.front().options;
  std::vector<Entry*> members;  // the requests this batch draws from, in arrival order
  for (auto& e : queue_) {
    if (!(e.options == options)) continue;
    if (limits_.batch_requests > 0 && members.size() == limits_.batch_requests) break;
    members.push_back(&e);
  }
  std::vector<Item> items;
  size_t longest = 0;
  // Round-robin: one sentence from each member in turn until the budget is met or nothing fits.
  for (bool added = true; added && items.size() < capacity;) {
    added = false;
    for (Entry* e : members) {
      if (items.size() == capacity) break;
      if (e->next == e->order.size()) continue;
      const size_t index = e->order[e->next];
      const size_t length = e->sources[index].size() + 1;  // + EOS
      const size_t padded = std::max(longest, length) * (items.size() + 1);
      // A sentence that alone exceeds the token budget still forms a batch of its own.
      if (limits_.batch_tokens > 0 && padded > limits_.batch_tokens && !items.empty()) continue;
      longest = std::max(longest, length);
      sources.push_back(std::move(e->sources[index]));
      items.push_back({e->ticket, index});
      ++e->next;
      --waiting_;
      added = true;
    }
  }
  queue_.remove_if([](const Entry& e) { return e.next == e.order.size(); });
  if (metrics_) metrics_->set_queue(waiting_);
  return items;
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
    auto items = take_batch(sources, options, limits_.batch_size);
    lock.unlock();

    const auto start = Clock::now();
    std::vector<std::vector<Translation>> out;
    std::string failure;
    try {
      out = decoder_(sources, options);
      if (out.size() != sources.size()) failure = "internal error: the decoder returned a wrong number of results";
    } catch (const std::exception& e) {
      failure = e.what();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
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
    lock.lock();
    last_batch_end_ = Clock::now();
  }
}

void SentenceBatcher::run_continuous() {
  std::unique_ptr<DecodingStream> stream;
  SearchOptions options;
  std::map<int64_t, Item> in_stream;  // sentences being decoded, by stream id
  std::map<int64_t, size_t> source_tokens;
  int64_t next_id = 0;
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
      joining = take_batch(sources, options, limits_.batch_size);
      stream.reset();
    } else {
      drop_cancelled();
      for (const auto& [id, item] : in_stream)
        if (item.ticket->cancelled()) leaving.push_back(id);
      // Join at once while there is room, unless an older request waits for other options (then drain).
      if (!queue_.empty() && queue_.front().options == options && in_stream.size() < limits_.batch_size) {
        const size_t room = limits_.batch_size - in_stream.size();
        size_t ready = 0;
        for (const auto& e : queue_)
          if (e.options == options) ready += e.order.size() - e.next;
        if (ready >= std::min(room, std::max<size_t>(1, limits_.join_min))) {
          SearchOptions same;
          joining = take_batch(sources, same, room);
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
    for (auto& [id, result] : finished) {
      auto it = in_stream.find(id);
      if (it == in_stream.end()) continue;
      ++done;
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
    lock.lock();
  }
}

}  // namespace parla::serve

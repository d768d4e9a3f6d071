#pragma once
// parla-serve's counters, exposed at GET /metrics in Prometheus' text exposition format (version 0.0.4):
// requests by status code, sentences and tokens translated, sentences dropped because their client left, the
// queue depth, requests in flight, and histograms of decoder batch sizes, batch decoding time and request
// latency. Thread-safe; torch-free.
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace parla::serve {

// A cumulative histogram with fixed upper bounds (Prometheus' `le` buckets, +Inf implied).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Appends the metric's lines to `out`: NAME_bucket{le="..."} ..., NAME_sum, NAME_count.
  void render(const std::string& name, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::string> labels_;  // `_bucket{le="BOUND"} ` per bucket, formatted once
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();

  void request_done(int status, double seconds);
  void batch_decoded(size_t sentences, size_t requests, double seconds);
  void sentences_translated(uint64_t sentences, uint64_t source_tokens, uint64_t target_tokens);
  void sentences_dropped(uint64_t n) { dropped_ += n; }
  void set_queue(size_t sentences) { queue_ = sentences; }
  void set_queued_cost(double cost) { queued_cost_ = cost; }
  void in_flight(int delta) { in_flight_ += delta; }
  void set_ready(bool ready) { ready_ = ready; }
  // Connections: opened, and closed with a reason ("done", "header_timeout", "body_timeout", "write_timeout",
  // "evicted", "refused", "client_gone", "stopping", "error").
  void connection_opened() { ++connections_; }
  void connection_closed(const std::string& reason);

  std::string render() const;

 private:
  mutable std::mutex mutex_;
  std::map<int, uint64_t> requests_;  // by status code
  std::map<std::string, uint64_t> closed_;  // connections closed, by reason
  std::atomic<int64_t> connections_{0};
  std::atomic<uint64_t> sentences_{0}, source_tokens_{0}, target_tokens_{0}, dropped_{0}, batches_{0};
  std::atomic<size_t> queue_{0};
  std::atomic<double> queued_cost_{0};
  std::atomic<int64_t> in_flight_{0};
  std::atomic<bool> ready_{false};
  Histogram batch_sentences_, batch_requests_, batch_seconds_, latency_;
};

}  // namespace parla::serve

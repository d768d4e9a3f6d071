#include "serve/server_metrics.h"

#include <charconv>
#include <cmath>

namespace parla::serve {
namespace {

// Prometheus floats, as "%.9g" would write them. Rendered with appends and to_chars rather than ostringstreams:
// /metrics took 80 us, and 10,000 clients pipelining it kept the event loop busy for seconds (issue 59).
std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[40];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 9);
  return std::string(buf, r.ptr);
}

void append(std::string& out, uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void append(std::string& out, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

// NAME VALUE\n
template <class T>
void sample(std::string& out, const char* name, T value) {
  out += name;
  out += ' ';
  append(out, value);
  out += '\n';
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  for (size_t b = 0; b <= bounds_.size(); ++b)
    labels_.push_back("_bucket{le=\"" + (b < bounds_.size() ? number(bounds_[b]) : std::string("+Inf")) + "\"} ");
}

void Histogram::observe(double v) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t b = 0;
  while (b < bounds_.size() && v > bounds_[b]) ++b;
  ++counts_[b];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t cumulative = 0;
  for (size_t b = 0; b <= bounds_.size(); ++b) {
    cumulative += counts_[b];
    out += name;
    out += labels_[b];
    append(out, cumulative);
    out += '\n';
  }
  out += name;
  out += "_sum ";
  out += number(sum_);
  out += '\n';
  out += name;
  out += "_count ";
  append(out, count_);
  out += '\n';
}

ServerMetrics::ServerMetrics()
    : batch_sentences_({1, 2, 4, 8, 16, 32, 64, 128, 256}),
      batch_requests_({1, 2, 4, 8, 16, 32, 64, 128}),
      batch_seconds_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}),
      latency_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}) {}

void ServerMetrics::request_done(int status, double seconds) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++requests_[status];
  }
  latency_.observe(seconds);
}

void ServerMetrics::connection_closed(const std::string& reason) {
  --connections_;
  std::lock_guard<std::mutex> lock(mutex_);
  ++closed_[reason];
}

void ServerMetrics::batch_decoded(size_t sentences, size_t requests, double seconds) {
  ++batches_;
  batch_sentences_.observe(static_cast<double>(sentences));
  batch_requests_.observe(static_cast<double>(requests));
  batch_seconds_.observe(seconds);
}

void ServerMetrics::sentences_translated(uint64_t sentences, uint64_t source_tokens, uint64_t target_tokens) {
  sentences_ += sentences;
  source_tokens_ += source_tokens;
  target_tokens_ += target_tokens;
}

std::string ServerMetrics::render() const {
  std::string out;
  out.reserve(6144);
  header(out, "parla_ready", "gauge", "1 when the model is loaded and requests are served.");
  sample(out, "parla_ready", int64_t{ready_ ? 1 : 0});
  header(out, "parla_requests_total", "counter", "HTTP requests answered, by status code.");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [code, n] : requests_) {
      out += "parla_requests_total{code=\"";
      append(out, int64_t{code});
      out += "\"} ";
      append(out, n);
      out += '\n';
    }
  }
  header(out, "parla_connections", "gauge", "Open client connections.");
  sample(out, "parla_connections", connections_.load());
  header(out, "parla_connections_closed_total", "counter",
         "Client connections closed, by reason (done, header_timeout, body_timeout, write_timeout, evicted: "
         "closed to make room for a new one at serve.max_connections, refused: answered 503 at that limit, "
         "client_gone, stopping, error).");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [reason, n] : closed_) {
      out += "parla_connections_closed_total{reason=\"";
      out += reason;
      out += "\"} ";
      append(out, n);
      out += '\n';
    }
  }
  header(out, "parla_requests_in_flight", "gauge", "Translation requests received and not yet answered.");
  sample(out, "parla_requests_in_flight", in_flight_.load());
  header(out, "parla_queue_sentences", "gauge", "Sentences waiting for a decoder batch.");
  sample(out, "parla_queue_sentences", uint64_t{queue_.load()});
  header(out, "parla_queued_cost", "gauge",
         "Decoding cost waiting for a batch: beam size x allowed output tokens, summed (serve.max_queued_cost).");
  sample(out, "parla_queued_cost", static_cast<int64_t>(queued_cost_.load()));
  header(out, "parla_sentences_total", "counter", "Sentences translated.");
  sample(out, "parla_sentences_total", sentences_.load());
  header(out, "parla_source_tokens_total", "counter", "Source SentencePiece pieces translated.");
  sample(out, "parla_source_tokens_total", source_tokens_.load());
  header(out, "parla_target_tokens_total", "counter", "Target pieces of the best translations (EOS not counted).");
  sample(out, "parla_target_tokens_total", target_tokens_.load());
  header(out, "parla_dropped_sentences_total", "counter",
         "Sentences dropped because their client disconnected or their request ran out of time (before "
         "decoding; during it with continuous batching, or when no request of a static batch is left).");
  sample(out, "parla_dropped_sentences_total", dropped_.load());
  header(out, "parla_batches_total", "counter", "Decoder batches run.");
  sample(out, "parla_batches_total", batches_.load());
  header(out, "parla_batch_sentences", "histogram", "Sentences per decoder batch.");
  batch_sentences_.render("parla_batch_sentences", out);
  header(out, "parla_batch_requests", "histogram", "Requests sharing one decoder batch.");
  batch_requests_.render("parla_batch_requests", out);
  header(out, "parla_batch_seconds", "histogram", "Time to decode one batch.");
  batch_seconds_.render("parla_batch_seconds", out);
  header(out, "parla_request_duration_seconds", "histogram", "Time from a request's arrival to its answer.");
  latency_.render("parla_request_duration_seconds", out);
  return out;
}

}  // namespace parla::serve

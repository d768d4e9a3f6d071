#include "serve/server_metrics.h"

#include <cmath>
#include <iomanip>
#include <sstream>

namespace parla::serve {
namespace {

// Prometheus floats: shortest round-trip form is not needed, 6 significant digits are plenty for seconds.
std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  std::ostringstream s;
  s << std::setprecision(9) << v;
  return s.str();
}

void header(std::ostringstream& out, const std::string& name, const std::string& type, const std::string& help) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t b = 0;
  while (b < bounds_.size() && v > bounds_[b]) ++b;
  ++counts_[b];
  sum_ += v;
  ++count_;
}

std::string Histogram::render(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream out;
  uint64_t cumulative = 0;
  for (size_t b = 0; b <= bounds_.size(); ++b) {
    cumulative += counts_[b];
    out << name << "_bucket{le=\"" << (b < bounds_.size() ? number(bounds_[b]) : "+Inf") << "\"} " << cumulative
        << '\n';
  }
  out << name << "_sum " << number(sum_) << '\n' << name << "_count " << count_ << '\n';
  return out.str();
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
  std::ostringstream out;
  header(out, "parla_ready", "gauge", "1 when the model is loaded and requests are served.");
  out << "parla_ready " << (ready_ ? 1 : 0) << '\n';
  header(out, "parla_requests_total", "counter", "HTTP requests answered, by status code.");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [code, n] : requests_) out << "parla_requests_total{code=\"" << code << "\"} " << n << '\n';
  }
  header(out, "parla_connections", "gauge", "Open client connections.");
  out << "parla_connections " << connections_.load() << '\n';
  header(out, "parla_connections_closed_total", "counter",
         "Client connections closed, by reason (done, header_timeout, body_timeout, write_timeout, evicted: "
         "closed to make room for a new one at serve.max_connections, refused: answered 503 at that limit, "
         "client_gone, stopping, error).");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [reason, n] : closed_)
      out << "parla_connections_closed_total{reason=\"" << reason << "\"} " << n << '\n';
  }
  header(out, "parla_requests_in_flight", "gauge", "Translation requests received and not yet answered.");
  out << "parla_requests_in_flight " << in_flight_.load() << '\n';
  header(out, "parla_queue_sentences", "gauge", "Sentences waiting for a decoder batch.");
  out << "parla_queue_sentences " << queue_.load() << '\n';
  header(out, "parla_queued_cost", "gauge",
         "Decoding cost waiting for a batch: beam size x allowed output tokens, summed (serve.max_queued_cost).");
  out << "parla_queued_cost " << static_cast<int64_t>(queued_cost_.load()) << '\n';
  header(out, "parla_sentences_total", "counter", "Sentences translated.");
  out << "parla_sentences_total " << sentences_.load() << '\n';
  header(out, "parla_source_tokens_total", "counter", "Source SentencePiece pieces translated.");
  out << "parla_source_tokens_total " << source_tokens_.load() << '\n';
  header(out, "parla_target_tokens_total", "counter", "Target pieces of the best translations (EOS not counted).");
  out << "parla_target_tokens_total " << target_tokens_.load() << '\n';
  header(out, "parla_dropped_sentences_total", "counter",
         "Sentences dropped because their client disconnected or their request ran out of time (before "
         "decoding; during it with continuous batching, or when no request of a static batch is left).");
  out << "parla_dropped_sentences_total " << dropped_.load() << '\n';
  header(out, "parla_batches_total", "counter", "Decoder batches run.");
  out << "parla_batches_total " << batches_.load() << '\n';
  header(out, "parla_batch_sentences", "histogram", "Sentences per decoder batch.");
  out << batch_sentences_.render("parla_batch_sentences");
  header(out, "parla_batch_requests", "histogram", "Requests sharing one decoder batch.");
  out << batch_requests_.render("parla_batch_requests");
  header(out, "parla_batch_seconds", "histogram", "Time to decode one batch.");
  out << batch_seconds_.render("parla_batch_seconds");
  header(out, "parla_request_duration_seconds", "histogram", "Time from a request's arrival to its answer.");
  out << latency_.render("parla_request_duration_seconds");
  return out.str();
}

}  // namespace parla::serve

#include "serve/translation_service.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace parla::serve {
namespace {

using Clock = std::chrono::steady_clock;

Reply error_reply(int status, const std::string& message, int retry_after = 0) {
  Reply r;
  r.status = status;
  r.body = error_body(message);
  r.retry_after = retry_after;
  return r;
}

// 0.5 -> "0.5", 60 -> "60".
std::string seconds_text(double s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

}  // namespace

TranslationService::TranslationService(const ServeConfig& serve) : serve_(serve) {
  limits_.max_sentences = static_cast<size_t>(serve.max_sentences);
  limits_.max_beam_size = serve.max_beam_size;
}

TranslationService::~TranslationService() { shutdown(); }

void TranslationService::start(Backend backend) {
  limits_.languages = backend.languages;
  // Read by begin() only after it has seen the batcher set below, under the mutex.
  limits_.search = backend.search;
  limits_.search.beam_size = std::min(limits_.search.beam_size, serve_.max_beam_size);
  const BatcherLimits b = BatcherLimits::from_config(serve_);
  auto batcher = backend.open_stream
                     ? std::make_shared<SentenceBatcher>(b, backend.open_stream, &metrics_, backend.decode)
                     : std::make_shared<SentenceBatcher>(b, backend.decode, &metrics_);
  std::lock_guard<std::mutex> lock(mutex_);
  backend_ = std::move(backend);
  batcher_ = std::move(batcher);
  metrics_.set_ready(true);
}

Reply TranslationService::health() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!accepting_) return error_reply(503, "stopping", 0);
  if (!batcher_) return error_reply(503, "loading the model", 1);
  if (serve_.health_max_queued_s > 0) {
    // Degraded: a load balancer should send its traffic elsewhere until the queue drains.
    const double queued = batcher_->queued_seconds();
    if (queued > serve_.health_max_queued_s) {
      Reply r = error_reply(503, "degraded: the queue holds about " + std::to_string(static_cast<int64_t>(queued)) +
                                     " s of decoding, more than serve.health_max_queued_s",
                            static_cast<int>(std::min(60.0, std::ceil(queued - serve_.health_max_queued_s))));
      r.retry_after = std::max(1, r.retry_after);
      return r;
    }
  }
  Reply r;
  r.body = R"({"status":"ok"})";
  return r;
}

Reply TranslationService::metrics() const {
  Reply r;
  r.body = metrics_.render();
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  return r;
}

Reply TranslationService::not_found(const std::string& path) {
  return error_reply(404, "no such route: " + excerpt(path) +
                              " (routes: POST /translate, GET /health, GET /metrics)");
}

Reply TranslationService::method_not_allowed(const std::string& method, const std::string& path,
                                             const std::string& allow) {
  Reply r = error_reply(405, excerpt(method) + " is not allowed on " + path + " (allowed: " + allow + ")");
  r.allow = allow;
  return r;
}

Reply TranslationService::body_too_large(int64_t max_request_bytes) {
  return error_reply(413, "the request body is larger than " + std::to_string(max_request_bytes) +
                              " bytes (serve.max_request_bytes)");
}

Reply TranslationService::header_too_large(int64_t max_header_bytes) {
  return error_reply(431, "the request line and headers are larger than " + std::to_string(max_header_bytes) +
                              " bytes (serve.max_header_bytes)");
}

Reply TranslationService::malformed(const std::string& reason) {
  return error_reply(400, "the request cannot be read as HTTP/1.1: " + excerpt(reason, 120));
}

Reply TranslationService::unsupported_encoding(const std::string& encoding) {
  Reply r = error_reply(415, "Content-Encoding \"" + excerpt(encoding) +
                                 "\" is not accepted: send the body uncompressed (its size is bounded by "
                                 "serve.max_request_bytes as it arrives)");
  r.accept_encoding = "identity";
  return r;
}

Reply TranslationService::unsupported_transfer(const std::string& encoding) {
  return error_reply(501, "Transfer-Encoding \"" + excerpt(encoding) + "\" is not implemented (only chunked)");
}

Reply TranslationService::unauthorized() {
  Reply r = error_reply(401, "missing or wrong API key: send \"Authorization: Bearer <key>\" (serve.api_key)");
  r.www_authenticate = "Bearer";
  return r;
}

Reply TranslationService::overloaded(const std::string& what) { return error_reply(503, what, 1); }

bool TranslationService::begin(const std::string& body, Job& job, Reply& reply) {
  job.arrived = Clock::now();
  std::shared_ptr<SentenceBatcher> batcher;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!accepting_) {
      reply = error_reply(503, "the server is shutting down", 0);
      count(reply, job.arrived);
      return false;
    }
    if (!batcher_) {
      reply = error_reply(503, "the model is still loading", 1);
      count(reply, job.arrived);
      return false;
    }
    batcher = batcher_;
  }
  RequestError error;
  if (!parse_translate_request(body, limits_, job.request, error)) {
    reply = error_reply(error.status, error.message);
    count(reply, job.arrived);
    return false;
  }
  std::vector<std::vector<int>> sources;
  sources.reserve(job.request.lines.size());
  try {
    for (const auto& line : job.request.lines) {
      sources.push_back(backend_.encode(line));
      auto& ids = sources.back();  // another source language than the model's default: its token instead
      if (job.request.source_language >= 0 && !ids.empty() && ids[0] == limits_.languages.default_source)
        ids[0] = job.request.source_language;
    }
  } catch (const std::exception& e) {
    reply = error_reply(500, std::string("cannot encode the request: ") + e.what());
    count(reply, job.arrived);
    return false;
  }
  // The ids are all a waiting request needs (format_translate_response counts texts, it does not read them): a
  // megabyte of text waiting in the queue would otherwise be held twice (texts and lines) until its answer.
  std::vector<std::string>(job.request.texts.size()).swap(job.request.texts);
  std::vector<std::string>().swap(job.request.lines);
  const auto deadline =
      serve_.request_timeout_s > 0
          ? job.arrived + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(std::min(serve_.request_timeout_s, 1e9)))
          : Clock::time_point::max();
  std::string refused;
  job.ticket = batcher->submit(std::move(sources), job.request.search, deadline, &refused);
  if (!job.ticket) {
    reply = error_reply(503, "the server is overloaded: " + refused + "; retry later", 1);
    count(reply, job.arrived);
    return false;
  }
  metrics_.in_flight(+1);
  return true;
}

Reply TranslationService::finish(const Job& job) {
  Reply reply;
  if (job.settled.exchange(true)) {
    reply.status = 0;
    return reply;
  }
  const std::string failure = job.ticket->failure();
  if (job.ticket->expired()) {
    reply.status = 504;
    reply.body = format_translate_response(
        job.request, job.ticket->results(), job.ticket->delivered(),
        "the request took longer than its deadline of " + seconds_text(serve_.request_timeout_s) +
            " s (serve.request_timeout_s); the lines not yet translated are null");
  } else if (!failure.empty()) {
    reply = error_reply(503, "translation failed: " + failure, 1);
  } else {
    reply.body = format_translate_response(job.request, job.ticket->results());
  }
  metrics_.in_flight(-1);
  count(reply, job.arrived);
  return reply;
}

void TranslationService::abandon(const Job& job) {
  if (job.settled.exchange(true)) return;
  job.ticket->cancel();
  metrics_.in_flight(-1);
  count(error_reply(499, "the client closed the connection before its answer"), job.arrived);
}

Reply TranslationService::translate(const std::string& body, const std::function<bool()>& client_gone,
                                    std::chrono::milliseconds poll) {
  Job job;
  Reply reply;
  if (!begin(body, job, reply)) return reply;
  while (!job.ticket->wait_for(poll)) {
    if (client_gone && client_gone()) {
      abandon(job);
      return error_reply(499, "the client closed the connection before its answer");
    }
  }
  return finish(job);
}

void TranslationService::count(const Reply& reply, Clock::time_point arrived) {
  metrics_.request_done(reply.status, std::chrono::duration<double>(Clock::now() - arrived).count());
}

void TranslationService::stop_accepting() {
  std::lock_guard<std::mutex> lock(mutex_);
  accepting_ = false;
  metrics_.set_ready(false);
}

void TranslationService::fail_waiting() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (batcher_) batcher_->fail_waiting("the drain timeout ran out before this request was decoded");
}

void TranslationService::shutdown() {
  std::shared_ptr<SentenceBatcher> batcher;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    batcher = std::move(batcher_);
  }
  if (batcher) batcher->stop();
}

}  // namespace parla::serve

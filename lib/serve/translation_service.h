#pragma once
// What parla-serve answers, independent of HTTP and of LibTorch: GET /health, GET /metrics and POST /translate
// (validation, queueing into the cross-request batcher, waiting, the JSON answer). The HTTP layer
// (serve/http_server.h) only moves bytes; the fuzz target and the unit tests drive this class directly with a
// toy decoder.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/config/serve_config.h"
#include "serve/sentence_batcher.h"
#include "serve/server_metrics.h"
#include "serve/translate_request.h"

namespace parla::serve {

// One HTTP answer.
struct Reply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  int retry_after = 0;  // seconds, sent as Retry-After when > 0 (503)
  std::string allow;    // sent as Allow (405)
  std::string www_authenticate;  // sent as WWW-Authenticate (401)
  std::string accept_encoding;   // sent as Accept-Encoding (415)
};

// What the loaded model provides: a raw line -> source piece ids (sanitised and truncated as parla-translate
// does), and the batch decoder.
struct Backend {
  std::function<std::vector<int>(const std::string& line)> encode;
  BatchDecoder decode;
  // The search requests start from (decode::TranslationModel::options: every `decoding` search key, the loaded
  // shortlist among them), so that an answer is parla-translate's; a request changes only its own fields (beam
  // size, n-best, languages), and beam_size is capped at serve.max_beam_size.
  SearchOptions search;
  // A multilingual model's languages, which requests may name (source_lang, target_lang).
  LanguageIds languages;
  // Continuous batching (serve.continuous) when set; `decode` then decodes only the batches that preempt the
  // stream (serve.preempt_ms).
  StreamOpener open_stream;
};

class TranslationService {
 public:
  explicit TranslationService(const ServeConfig& serve);
  ~TranslationService();

  // The model is loaded: from now on requests are translated (before, /translate and /health answer 503).
  void start(Backend backend);

  Reply health() const;
  Reply metrics() const;
  static Reply not_found(const std::string& path);
  static Reply method_not_allowed(const std::string& method, const std::string& path, const std::string& allow);
  // What the HTTP layer refuses before a request reaches the service (each quotes the key that sets the limit).
  static Reply body_too_large(int64_t max_request_bytes);           // 413
  static Reply header_too_large(int64_t max_header_bytes);          // 431
  static Reply malformed(const std::string& reason);                // 400: not HTTP/1.1
  static Reply unsupported_encoding(const std::string& encoding);   // 415: Content-Encoding other than identity
  static Reply unsupported_transfer(const std::string& encoding);   // 501: Transfer-Encoding other than chunked
  static Reply unauthorized();                                      // 401: serve.api_key not given
  static Reply overloaded(const std::string& what);                 // 503 + Retry-After: connections or memory

  // POST /translate in two steps, so that the HTTP layer can wait on the ticket and notice a client that leaves.
  struct Job {
    TranslateRequest request;  // its texts and lines are freed once encoded: a waiting request holds only ids
    std::shared_ptr<Ticket> ticket;
    std::chrono::steady_clock::time_point arrived;
    // Set by the first of finish() and abandon(): a job is answered or dropped once, never both.
    mutable std::atomic<bool> settled{false};
  };
  // Validates and queues `body`. Returns true with `job` queued, or false with `reply` set (an error, a full
  // queue, a server still loading or stopping).
  bool begin(const std::string& body, Job& job, Reply& reply);
  // The answer of a job whose ticket is done (status 0, nothing to send, if the job was abandoned first).
  Reply finish(const Job& job);
  // The client is gone: its sentences still waiting are dropped, and the request is counted as 499.
  void abandon(const Job& job);
  // begin + wait + finish; `client_gone` is polled every `poll` while waiting (tests, the fuzz target).
  Reply translate(const std::string& body, const std::function<bool()>& client_gone = {},
                  std::chrono::milliseconds poll = std::chrono::milliseconds(20));
  // A reply that did not go through begin() (404, 405, 413 from the HTTP layer): counted in the metrics.
  void count(const Reply& reply, std::chrono::steady_clock::time_point arrived);
  // The HTTP layer's connections, for the metrics (server_metrics.h names the reasons).
  void connection_opened() { metrics_.connection_opened(); }
  void connection_closed(const std::string& reason) { metrics_.connection_closed(reason); }

  // SIGTERM/SIGINT: new requests get 503; those in flight go on.
  void stop_accepting();
  // The drain timeout ran out: what still waits for a batch fails (503).
  void fail_waiting();
  // Stops the decoding thread (after stop_accepting and once requests in flight are answered or failed).
  void shutdown();

 private:
  ServeConfig serve_;
  RequestLimits limits_;
  ServerMetrics metrics_;
  mutable std::mutex mutex_;
  Backend backend_;
  std::shared_ptr<SentenceBatcher> batcher_;
  bool accepting_ = true;
};

}  // namespace parla::serve

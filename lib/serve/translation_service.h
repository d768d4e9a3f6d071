#pragma once
// What parla-serve answers, independent of HTTP and of LibTorch: GET /health, GET /metrics and POST /translate
// (validation, queueing into the cross-request batcher, waiting, the JSON answer). The HTTP layer
// (serve/http_server.h) only moves bytes; the fuzz target and the unit tests drive this class directly with a
// toy decoder.
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/config/decoding_config.h"
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
};

// What the loaded model provides: a raw line -> source piece ids (sanitised and truncated as parla-translate
// does), and the batch decoder.
struct Backend {
  std::function<std::vector<int>(const std::string& line)> encode;
  BatchDecoder decode;
  // Continuous batching (serve.continuous) when set; `decode` is then unused.
  StreamOpener open_stream;
};

class TranslationService {
 public:
  TranslationService(const ServeConfig& serve, const DecodingConfig& decoding);
  ~TranslationService();

  // The model is loaded: from now on requests are translated (before, /translate and /health answer 503).
  void start(Backend backend);

  Reply health() const;
  Reply metrics() const;
  static Reply not_found(const std::string& path);
  static Reply method_not_allowed(const std::string& method, const std::string& path, const std::string& allow);

  // POST /translate in two steps, so that the HTTP layer can wait on the ticket and notice a client that leaves.
  struct Job {
    TranslateRequest request;
    std::shared_ptr<Ticket> ticket;
    std::chrono::steady_clock::time_point arrived;
  };
  // Validates and queues `body`. Returns true with `job` queued, or false with `reply` set (an error, a full
  // queue, a server still loading or stopping).
  bool begin(const std::string& body, Job& job, Reply& reply);
  // The answer of a job whose ticket is done.
  Reply finish(const Job& job);
  // The client is gone: its sentences still waiting are dropped.
  void abandon(const Job& job);
  // begin + wait + finish; `client_gone` is polled every `poll` while waiting (tests, the fuzz target).
  Reply translate(const std::string& body, const std::function<bool()>& client_gone = {},
                  std::chrono::milliseconds poll = std::chrono::milliseconds(20));
  // A reply that did not go through begin() (404, 405, 413 from the HTTP layer): counted in the metrics.
  void count(const Reply& reply, std::chrono::steady_clock::time_point arrived);

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

#pragma once
// parla-serve's HTTP/1.1 endpoint: cpp-httplib (Debian's libcpp-httplib) moves the bytes, TranslationService
// decides every answer. Each connection is served by one thread of a pool of serve.threads, which waits for its
// request's sentences without holding a core (the decoding thread does the work), so serve.threads bounds the
// requests in flight, not the batch. A client that closes its connection while waiting has its sentences that
// are still queued dropped.
#include <memory>
#include <string>

#include "core/config/serve_config.h"
#include "serve/translation_service.h"

namespace parla::serve {

class HttpServer {
 public:
  HttpServer(TranslationService& service, const ServeConfig& cfg);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds serve.host:serve.port (port 0: any free port) and returns the port. DataError naming the address, the
  // keys and the system's reason when it cannot (a port in use, an unknown host).
  int bind();
  // Serves on a background thread until stop().
  void start();
  // Stops accepting connections and returns once every request in flight is answered.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace parla::serve

#pragma once
// parla-serve's HTTP/1.1 endpoint, event-driven (Boost.Beast over Asio, header-only from Debian's libboost-dev):
// one event-loop thread serves every connection, so connections cost a socket and a few hundred bytes rather
// than a thread, and a thousand slow or idle clients do not keep a new one waiting. TranslationService decides
// every answer; a small pool of serve.threads parses requests and encodes their sentences, and a request waits
// for its translation without holding any thread (the decoding thread wakes it).
//
// What a client cannot do (issue 36), each bounded by a `serve` key:
//   - hold the server with connections: serve.max_connections are open at most, and a new one beyond closes
//     the one that has waited longest without a request in flight, of the address with the most connections
//     (issue 59); when all have one, up to 16 more may ask /health or /metrics (a load balancer's probe), and
//     beyond those it gets 503; serve.max_connections_per_address from one address (503 beyond);
//   - send slowly or not at all: serve.header_timeout_s for the headers (from the connection's start or its
//     previous answer; a timer of its own, which bytes that keep coming do not put off), serve.body_timeout_s
//     for the body, serve.write_timeout_s for reading the answer;
//   - send much: serve.max_header_bytes and serve.max_header_fields, counted across reads (431),
//     serve.max_request_bytes for the decoded body whatever its
//     transfer encoding (413; compressed bodies are refused with 415), serve.max_buffered_bytes for all bodies
//     being received together (503);
//   - keep the server from stopping: stop_accepting() closes every connection without a request in flight.
// Pipelined requests are answered in order, one at a time, the next taken once the previous answer has left the
// socket (a client that pipelines and never reads costs one answer, not one per request). A client that
// half-closes after its request is answered; one that closes entirely has its waiting sentences dropped (told
// apart by an interim "100 Continue", which a half-closed client reads and a closed socket answers with a reset).
#include <chrono>
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
  // Serves on background threads until stop().
  void start();
  // Stops accepting and closes every connection without a request in flight; those with one are answered
  // (with Connection: close) and then closed.
  void stop_accepting();
  // Answers 503 (Connection: close) every request still waiting for its translation: the drain is cut short.
  void fail_in_flight();
  // Waits until no connection is open, at most `limit`; true if none is.
  bool wait_closed(std::chrono::duration<double> limit);
  // Closes every connection, answered or not, and stops the threads.
  void stop();
  // The connection limit in force: serve.max_connections, lowered to fit the file-descriptor limit.
  int max_connections() const;

  struct Impl;  // opaque (http_server.cpp; its connections use it too)

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace parla::serve

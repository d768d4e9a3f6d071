#pragma once
// Section "serve": parla-serve's HTTP endpoint, its cross-request batching and its limits. The search itself is
// the `decoding` section's (beam size, length penalty, ...), so a server answers exactly as parla-translate does.
#include <string>

#include "core/config/schema.h"

namespace parla {

struct ServeConfig {
  std::string host = "127.0.0.1";  // address to listen on (0.0.0.0 = every interface)
  int port = 8080;                 // TCP port; 0 = any free port (the log names it)
  int batch_size = 64;             // sentences per decoder batch, from any number of requests
  int batch_tokens = 0;            // padded source tokens per decoder batch; 0 = by batch_size only
  double max_wait_ms = 5;          // how long the oldest waiting sentence may wait for its batch to fill (counted
                                   // from the previous batch's end if later)
  int batch_requests = 0;          // requests that may share one batch; 0 = any (1 = no cross-request batching)
  bool continuous = false;         // continuous batching: sentences join and leave a running batch between steps
  int join_min = 1;                // continuous batching: sentences that join a running batch together
  int max_queue = 4096;            // sentences waiting for a batch; beyond it requests get 503 + Retry-After
  // Bounded decoding work (issue 59): a request's deadline, the queue bounded in decoding cost, degraded health.
  double request_timeout_s = 60;   // per request, from arrival to answer; 504 with what is done (0 = none)
  int max_queued_cost = 4000000;   // beam x allowed output tokens of the waiting sentences (503 beyond; 0 = any)
  int max_batch_cost = 32768;      // beam x allowed output tokens summed over a batch (decoding memory; 0 = any)
  double preempt_ms = 500;         // a batch decoding this long lets a batch of much cheaper sentences go first (0 = never)
  double health_max_queued_s = 10; // /health answers 503 when the queue holds more seconds of decoding (0 = never)
  int max_request_bytes = 1 << 20; // request body limit (413 beyond)
  int max_sentences = 1024;        // sentences (lines of all texts) per request (413 beyond)
  int max_beam_size = 10;          // the largest "beam_size" a request may ask for (400 beyond)
  int threads = 2;                 // threads that parse requests and encode their sentences (not connections)
  double drain_timeout_s = 30;     // on SIGTERM/SIGINT: time given to requests in flight before exiting
  // Hostile clients (issue 36): connections are cheap, but bounded in number, time and bytes.
  int max_connections = 10000;     // open connections; beyond, the oldest idle or slow one is closed (or 503)
  int max_header_bytes = 8192;     // request line and header fields together (431 beyond)
  int max_buffered_bytes = 256 << 20;  // request bodies held in memory at once, all connections (503 beyond)
  double header_timeout_s = 10;    // from a connection's start (or its previous answer) to the end of the headers
  double body_timeout_s = 30;      // to receive a body once its headers are in
  double write_timeout_s = 30;     // to write an answer (a client that does not read it is dropped)
  int max_keep_alive_requests = 1000;  // requests on one connection before the server closes it
  std::string api_key;             // when set: requests must carry "Authorization: Bearer <api_key>" (401 without)
  // Hostile clients, round three (issue 59): header fields and connections per client address.
  int max_header_fields = 100;     // header fields per request (431 beyond), counted across every read
  int max_connections_per_address = 1024;  // open connections from one client address; 0 = no limit

  static const config::SectionSchema<ServeConfig>& schema();
};

}  // namespace parla

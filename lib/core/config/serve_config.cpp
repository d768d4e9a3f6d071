#include "core/config/serve_config.h"

namespace parla {

const config::SectionSchema<ServeConfig>& ServeConfig::schema() {
  using namespace config;
  static const SectionSchema<ServeConfig> s = [] {
    SectionSchema<ServeConfig> s("serve",
                                 "parla-serve: HTTP endpoint, cross-request batching and limits (the search is "
                                 "the `decoding` section's).");
    s.add("host", &ServeConfig::host, "Address to listen on; 0.0.0.0 listens on every interface.").flag("--host");
    s.add("port", &ServeConfig::port, "TCP port; 0 picks a free one (the log names it).", between(0, 65535))
        .flag("-p,--port");
    s.add("batch_size", &ServeConfig::batch_size,
          "Sentences per decoder batch, taken from every waiting request that shares the same options.",
          at_least(1)).flag("--batch-size,--mini-batch");
    s.add("batch_tokens", &ServeConfig::batch_tokens,
          "Padded source tokens per decoder batch (longest source x sentences); 0 = batch_size only.", at_least(0))
        .flag("--batch-tokens,--max-tokens");
    s.add("max_wait_ms", &ServeConfig::max_wait_ms,
          "Milliseconds the oldest waiting sentence may wait for its batch to fill before it is decoded anyway, "
          "counted from the end of the previous batch if that is later (so that the clients it answered can send "
          "their next sentences in time to join).",
          at_least(0)).flag("--max-wait-ms");
    s.add("batch_requests", &ServeConfig::batch_requests,
          "Requests that may share one decoder batch; 0 = any number, 1 = no cross-request batching (each "
          "request's sentences are batched alone).",
          at_least(0)).flag("--batch-requests");
    s.add("continuous", &ServeConfig::continuous,
          "Continuous batching: waiting sentences join the batch being decoded at its next step (up to "
          "serve.batch_size sentences) and finished ones leave it, instead of each batch running until its "
          "longest sentence ends. Answers are the same either way.")
        .flag("--continuous");
    s.add("join_min", &ServeConfig::join_min,
          "Continuous batching: waiting sentences join a running batch only when at least this many can join "
          "together (or as many as it has room for): each join runs the encoder and merges the decoder state, "
          "which costs less per sentence in groups.",
          at_least(1)).flag("--join-min");
    s.add("max_queue", &ServeConfig::max_queue,
          "Sentences waiting for a batch; a request that would exceed it is refused with 503 and Retry-After.",
          at_least(1)).flag("--max-queue");
    s.add("request_timeout_s", &ServeConfig::request_timeout_s,
          "Seconds a translation request may take from its arrival to its answer; then it is answered 504 with "
          "the lines translated so far (null for the rest) and an \"error\", and its sentences leave the queue "
          "and, with serve.continuous, the running batch (without it, a batch already decoding runs to its end). "
          "0 = no deadline.",
          at_least(0)).flag("--request-timeout");
    s.add("max_queued_cost", &ServeConfig::max_queued_cost,
          "Decoding cost the queue may hold, summed over the waiting sentences as beam size x the output tokens "
          "their search allows (decoding.max_length_factor x source pieces + decoding.max_length_offset); a "
          "request that would exceed it is refused with 503 and Retry-After. 0 = no bound.",
          at_least(0)).flag("--max-queued-cost");
    s.add("max_batch_cost", &ServeConfig::max_batch_cost,
          "Decoding cost one batch may hold (with serve.continuous, the running search), summed over its sentences "
          "as beam size x the output tokens their search allows (the unit of serve.max_queued_cost). The decoder's "
          "memory grows with it: hypothesis rows times the positions they may reach (docs/SERVING.md has the "
          "figures for a model). A sentence that alone exceeds it is decoded in a batch of its own. 0 = no bound.",
          at_least(0)).flag("--max-batch-cost");
    s.add("preempt_ms", &ServeConfig::preempt_ms,
          "Preemption: once a batch has decoded this many milliseconds (since it started or since it last let "
          "another batch go first), sentences waiting that cost at most a quarter of its costliest sentence "
          "(beam size x allowed output tokens, as serve.max_queued_cost counts) are decoded as a batch of their "
          "own between two of its decoder steps, and it resumes after them; such a batch can be preempted in turn "
          "by cheaper ones still. A one-line request is then not held up by a batch of long sentences. Answers "
          "are the same either way. 0 = a batch runs to its end.",
          at_least(0)).flag("--preempt-ms");
    s.add("health_max_queued_s", &ServeConfig::health_max_queued_s,
          "GET /health answers 503 with Retry-After (degraded) while the queue holds more than this many seconds "
          "of decoding: the oldest waiting request's wait, the time the batch being decoded has run (static "
          "batching), or the queued cost at the cost per second measured so far, whichever is longest. 0 = "
          "/health never reports degraded.",
          at_least(0)).flag("--health-max-queued");
    s.add("max_request_bytes", &ServeConfig::max_request_bytes, "Largest request body in bytes (413 beyond).",
          at_least(64)).flag("--max-request-bytes");
    s.add("max_sentences", &ServeConfig::max_sentences,
          "Most sentences (lines of all texts) in one request (413 beyond).", at_least(1))
        .flag("--max-sentences");
    s.add("max_beam_size", &ServeConfig::max_beam_size,
          "Largest beam_size a request may ask for (400 beyond); requests without one use decoding.beam_size.",
          at_least(1)).flag("--max-beam-size");
    s.add("threads", &ServeConfig::threads,
          "Threads that parse requests and encode their sentences. Connections do not take threads: one "
          "event-loop thread serves all of them (up to serve.max_connections), and each request waits for its "
          "sentences without holding a thread (the decoding thread does the work).",
          at_least(1)).flag("--request-threads,--connection-threads");
    s.add("drain_timeout_s", &ServeConfig::drain_timeout_s,
          "On SIGTERM or SIGINT the server stops accepting, closes connections that have no request in flight, "
          "and gives requests in flight this many seconds to finish (then answers what still waits with 503); it "
          "exits 0 within this time plus one second, whatever its clients do.",
          at_least(0)).flag("--drain-timeout");
    s.add("max_connections", &ServeConfig::max_connections,
          "Open connections at most (lowered to fit the process's file-descriptor limit, with a warning). A new "
          "connection beyond it closes the connection that has waited longest without a request in flight (idle, "
          "or still sending its request); when every connection has a request in flight, the new one is answered "
          "503 with Retry-After and closed.",
          at_least(1)).flag("--max-connections");
    s.add("max_header_bytes", &ServeConfig::max_header_bytes,
          "Largest request line and header fields together, in bytes (431 beyond): bounds header lines and their "
          "number.",
          at_least(256)).flag("--max-header-bytes");
    s.add("max_buffered_bytes", &ServeConfig::max_buffered_bytes,
          "Request body bytes held in memory at once across all connections, from their arrival until they are "
          "parsed; a request that would exceed it is answered 503 with Retry-After.",
          at_least(1024)).flag("--max-buffered-bytes");
    s.add("header_timeout_s", &ServeConfig::header_timeout_s,
          "Seconds from a connection's start, or from its previous answer, to the end of its next request's "
          "headers; then the connection is closed (slow and idle clients alike).",
          at_least(0.01)).flag("--header-timeout");
    s.add("body_timeout_s", &ServeConfig::body_timeout_s,
          "Seconds to receive a request's whole body once its headers are in; then the connection is closed.",
          at_least(0.01)).flag("--body-timeout");
    s.add("write_timeout_s", &ServeConfig::write_timeout_s,
          "Seconds to write an answer; a client that does not read it in that time is disconnected.",
          at_least(0.01)).flag("--write-timeout");
    s.add("max_keep_alive_requests", &ServeConfig::max_keep_alive_requests,
          "Requests served on one keep-alive connection; the answer to the last says Connection: close.",
          at_least(1)).flag("--max-keep-alive-requests");
    s.add("api_key", &ServeConfig::api_key,
          "When not empty, POST /translate and GET /metrics need the header \"Authorization: Bearer <api_key>\" "
          "(compared in constant time; 401 without it); GET /health stays open for load balancers. Give it in "
          "a config file rather than with --set, which other users can read in the process list.");
    s.add("max_header_fields", &ServeConfig::max_header_fields,
          "Most header fields in one request (431 beyond), counted with serve.max_header_bytes across every read "
          "of the header, so that neither holds however the client splits its bytes.",
          at_least(8)).flag("--max-header-fields");
    s.add("max_connections_per_address", &ServeConfig::max_connections_per_address,
          "Open connections from one client address at most; a new one beyond is answered 503 with Retry-After "
          "and closed. 0 = no limit. Behind a reverse proxy every client has the proxy's address: set it above "
          "the proxy's connections to parla-serve, or 0. At serve.max_connections the connection closed to make "
          "room is the oldest waiting one of the address with the most connections, so one address's flood "
          "pushes out its own connections, not other clients'.",
          at_least(0)).flag("--max-connections-per-address");
    return s;
  }();
  return s;
}

}  // namespace parla

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
          "Milliseconds the oldest waiting sentence may wait for its batch to fill before it is decoded anyway.",
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
    s.add("max_request_bytes", &ServeConfig::max_request_bytes, "Largest request body in bytes (413 beyond).",
          at_least(64)).flag("--max-request-bytes");
    s.add("max_sentences", &ServeConfig::max_sentences,
          "Most sentences (lines of all texts) in one request (413 beyond).", at_least(1))
        .flag("--max-sentences");
    s.add("max_beam_size", &ServeConfig::max_beam_size,
          "Largest beam_size a request may ask for (400 beyond); requests without one use decoding.beam_size.",
          at_least(1)).flag("--max-beam-size");
    s.add("threads", &ServeConfig::threads,
          "Connection threads: requests handled at once (each waits for its sentences without holding a core).",
          at_least(1)).flag("--connection-threads");
    s.add("drain_timeout_s", &ServeConfig::drain_timeout_s,
          "On SIGTERM or SIGINT the server stops accepting and gives requests in flight this many seconds to "
          "finish, then exits 0.",
          at_least(0)).flag("--drain-timeout");
    return s;
  }();
  return s;
}

}  // namespace parla

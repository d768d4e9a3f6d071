// parla-serve: a translation server over HTTP/1.1 + JSON (POST /translate, GET /health, GET /metrics) that
// batches the sentences of concurrent requests together. Its flags are the `serve` keys, the search keys of
// `decoding` and the `runtime` keys (docs/CONFIG.md); the work is lib/serve (HTTP, queue, batching) and
// parla::decode::Translator (the same search as parla-translate, so answers are byte-identical).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "core/app.h"
#include "core/config.h"
#include "core/error.h"
#include "core/lean_load.h"
#include "runtime/runtime.h"
#include "runtime/runtime_device.h"
#include "core/schema_flags.h"
#include "decode/between_steps.h"
#include "decode/translation_model.h"
#include "decode/translator.h"
#include "serve/http_server.h"
#include "serve/stop_signal.h"
#include "serve/translation_service.h"

namespace {

constexpr int kServeMaxInputLength = 256;

// The help text: what the server answers, its limits, how it stops.
const char* const kHelp =
    "Serves translations over HTTP/1.1 with one or more parla checkpoints (several -m: an ensemble). "
    "Sentences of concurrent requests are decoded together in batches (serve.batch_size, "
    "serve.max_wait_ms); answers equal parla-translate's for the same sentences and options.\n"
    "  POST /translate {\"text\": \"...\"} -> {\"translation\": \"...\"}; {\"texts\": [...]} -> "
    "{\"translations\": [...]}; optional \"beam_size\" (<= serve.max_beam_size) and \"n_best\" "
    "(then each translation is a list of {\"text\", \"score\"}). Lines of a text are translated one "
    "by one and rejoined; each is cut at 256 SentencePiece pieces (with a warning) unless "
    "--max-input-length is given, and before that at 32 characters per piece (--max-input-chars).\n"
    "  GET /health: 503 while the model loads, 200 when ready.  GET /metrics: Prometheus text.\n"
    "Errors: 400 (bad JSON, types, fields, UTF-8, nesting, beam or n-best out of range), 401 "
    "(serve.api_key), 404, 405, 413 (body or sentences over the limits), 415 (compressed body), 431 "
    "(headers over serve.max_header_bytes), 503 + Retry-After (queue, connections or buffered bytes "
    "full, loading, stopping), 501 (a Transfer-Encoding other than chunked).\n"
    "Connections: one event-loop thread serves them all; they are bounded in number "
    "(serve.max_connections: beyond it the longest-waiting connection without a request in flight is "
    "closed), time (serve.header_timeout_s, body_timeout_s, write_timeout_s) and bytes "
    "(serve.max_header_bytes, max_request_bytes on the de-chunked body, max_buffered_bytes). Pipelined "
    "requests are answered in order; a half-closed client gets its answer.\n"
    "serve.api_key (no flag: give it in a -c config file, as flags and --set show in the process "
    "list): POST /translate and GET /metrics then need \"Authorization: Bearer <key>\" (401 "
    "without). TLS is not built in: put a reverse proxy in front (docs/SERVING.md: a tested nginx "
    "config).\n"
    "SIGTERM or SIGINT: stop accepting, close idle connections, finish requests in flight within "
    "serve.drain_timeout_s, exit 0 (always within that plus a second). A second signal answers the "
    "requests still in flight 503 and exits 0 within a second.\n"
    "Example: parla-serve -m model.pt --port 8080 &  curl -d '{\"text\":\"Hallo Welt\"}' "
    "localhost:8080/translate";

// What the server refuses to serve, before it loads anything.
void check_serve_config(const parla::Config& config) {
  if (config.decoding.sampling)
    throw parla::ConfigError("key 'decoding.sampling': parla-serve does not serve sampling (answers must not "
                             "depend on the batch); set it to false");
  if (config.decoding.alignment != parla::AlignmentOutput::kNone)
    throw parla::ConfigError("key 'decoding.alignment': parla-serve does not serve alignments; set it to \"\"");
  if (config.decoding.beam_size > config.serve.max_beam_size)
    throw parla::ConfigError("key 'decoding.beam_size' (" + std::to_string(config.decoding.beam_size) +
                             ") must not exceed 'serve.max_beam_size' (" +
                             std::to_string(config.serve.max_beam_size) + ")");
}

// The decoding the service calls: the translator's encoding, batches and streams, with the model's search options
// (every `decoding` search key, the shortlist it loaded among them: what parla-translate searches with) and
// languages.
parla::serve::Backend backend_of(parla::decode::Translator& translator, bool continuous) {
  parla::serve::Backend backend;
  backend.search = translator.options();
  backend.languages = {translator.model().language_ids, translator.model().source_language};
  backend.encode = [t = &translator](const std::string& line) { return t->encode_line(line, "a request"); };
  backend.decode = [t = &translator](const std::vector<std::vector<int>>& sources,
                                     const parla::decode::SearchOptions& options) {
    try {
      return t->translate_batch(sources, options);
    } catch (const parla::decode::SearchInterrupted&) {
      throw;  // the batcher stopped it: nobody waits for it any more
    } catch (const std::exception& e) {
      spdlog::error("decoding a batch of {} sentences failed: {}", sources.size(), parla::brief_reason(e));
      throw std::runtime_error(parla::brief_reason(e));
    }
  };
  if (continuous)
    backend.open_stream = [t = &translator](const parla::decode::SearchOptions& options) {
      return parla::serve::as_decoding_stream(t->open_stream(options));
    };
  return backend;
}

// Waits for SIGTERM/SIGINT, then stops accepting, drains the requests in flight within serve.drain_timeout_s and
// stops the server.
void stop_gracefully(parla::serve::StopSignals& stop_signals, parla::serve::TranslationService& service,
                     parla::serve::HttpServer& http, const parla::ServeConfig& serve) {
  const int signo = stop_signals.wait();
  spdlog::info("signal {}: stopping; requests in flight have {} s to finish (a second signal: 503 now)", signo,
               serve.drain_timeout_s);
  // Whatever clients and the decoder do, the process ends within the drain timeout plus a second, or a second
  // after a second signal: a batch being decoded cannot be interrupted, so if one still runs then, the process
  // exits without waiting for it (its clients were answered 503 by then).
  struct Deadline {
    std::mutex mutex;
    std::condition_variable changed;
    std::chrono::steady_clock::time_point exit_at;
    bool hurry = false;
  };
  auto deadline = std::make_shared<Deadline>();
  const auto drain = std::chrono::duration<double>(serve.drain_timeout_s);
  deadline->exit_at = std::chrono::steady_clock::now() +
                      std::chrono::duration_cast<std::chrono::steady_clock::duration>(drain) +
                      std::chrono::milliseconds(900);
  std::thread([deadline] {
    std::unique_lock<std::mutex> lock(deadline->mutex);
    while (std::chrono::steady_clock::now() < deadline->exit_at)
      deadline->changed.wait_until(lock, deadline->exit_at);
    spdlog::warn("still stopping after the drain: exiting now");
    spdlog::default_logger()->flush();
    std::_Exit(0);
  }).detach();
  // The signals stay blocked: a second one cuts the drain short instead of killing the process with requests
  // unanswered; later ones change nothing.
  std::thread([deadline, signals = stop_signals]() mutable {
    const int again = signals.wait();
    spdlog::warn("signal {} again: answering requests in flight with 503 and exiting", again);
    std::lock_guard<std::mutex> lock(deadline->mutex);
    deadline->hurry = true;
    deadline->exit_at = std::min(deadline->exit_at, std::chrono::steady_clock::now() + std::chrono::seconds(1));
    deadline->changed.notify_all();
  }).detach();
  service.stop_accepting();
  http.stop_accepting();  // connections without a request in flight are closed now
  const auto drain_end = std::chrono::steady_clock::now() + drain;
  bool closed = false;
  for (;;) {
    closed = http.wait_closed(std::chrono::milliseconds(20));
    std::lock_guard<std::mutex> lock(deadline->mutex);
    if (closed || deadline->hurry || std::chrono::steady_clock::now() >= drain_end) break;
  }
  if (!closed) {
    spdlog::warn("drain cut short (timeout or second signal): requests in flight are answered 503");
    service.fail_waiting();
    http.fail_in_flight();  // also those whose sentences are in the batch being decoded
    http.wait_closed(std::chrono::milliseconds(300));
  }
  http.stop();
  service.shutdown();
}

}  // namespace

int parla_serve_main(int argc, char** argv) {
  parla::runtime::tune_process(argc, argv);
  // Before any thread exists, so that all of them inherit the mask (serve/stop_signal.h).
  parla::serve::StopSignals stop_signals;
  parla::app::CommonFlags flags;
  flags.program = "parla-serve";
  CLI::App cli(kHelp, "parla-serve");
  parla::app::add_config_flags(cli, flags);
  // The search keys of `decoding` (not its batching and output-format keys, which the server sets itself).
  parla::app::SchemaFlags schema_flags(
      cli, {"serve", "runtime", "decoding.beam_size", "decoding.n_best", "decoding.length_penalty",
            "decoding.max_length_factor", "decoding.max_length_offset", "decoding.min_length",
            "decoding.max_input_length", "decoding.max_input_chars", "decoding.precision"});
  std::vector<std::string> models;
  cli.add_option("-m,--models,--model", models, "Checkpoint(s) to translate with; several form an ensemble")
      ->expected(1, -1);

  return parla::app::run(cli, flags, argc, argv, [&] {
    auto builder = parla::app::start_config(flags);
    schema_flags.apply(builder);
    // A client must not be able to send one line of a million pieces (attention is quadratic in it): unless the
    // user chose a limit, lines are cut at 256 pieces, with a warning, as parla-translate cuts at its limit.
    if (!builder.given("decoding.max_input_length"))
      builder.set("decoding.max_input_length", kServeMaxInputLength, "parla-serve's default");
    parla::Config config = builder.build();
    if (parla::app::dump_config_if_asked(flags, config)) return 0;
    if (models.empty()) throw parla::UsageError("no model given: pass a checkpoint with -m/--models");
    check_serve_config(config);

    // Declared first so that it outlives the service, whose decoding thread uses it.
    std::unique_ptr<parla::decode::Translator> translator;
    parla::serve::TranslationService service(config.serve);
    parla::serve::HttpServer http(service, config.serve);
    const int port = http.bind();
    http.start();
    spdlog::info("listening on http://{}:{} (loading the model; /health answers 503 until it is ready)",
                 config.serve.host, port);

    int used = parla::runtime::apply(config.runtime);
    const auto dev = parla::runtime::resolve_device(
        {config.runtime.device, schema_flags.origin("runtime.device"), 1, 0});
    spdlog::debug("{} threads, decoding on {}", used, parla::runtime::describe_device(dev));
    // The model loads between two page-outs (core/lean_load.h): this process serves from now on.
    translator = std::make_unique<parla::decode::Translator>(
        parla::load_lean([&] { return parla::decode::TranslationModel::load(models, config.decoding, dev); }),
        static_cast<uint64_t>(config.runtime.seed));
    service.start(backend_of(*translator, config.serve.continuous));
    spdlog::info("ready: POST http://{}:{}/translate ({} batches of up to {} sentences, {} ms wait)",
                 config.serve.host, port, config.serve.continuous ? "continuous" : "static",
                 config.serve.batch_size, config.serve.max_wait_ms);

    stop_gracefully(stop_signals, service, http, config.serve);
    spdlog::info("stopped");
    return 0;
  });
}

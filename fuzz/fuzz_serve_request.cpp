// libFuzzer target over parla-serve's request handling, everything between an HTTP body and the decoder:
// UTF-8 and JSON validation, field checks, line splitting, limits, queueing into the cross-request batcher,
// routing results back and the JSON answer. The decoder is a toy (each line's answer is its pieces reversed), so
// a misrouted or misjoined answer is visible. It aborts (a finding) when:
//   - the status is not one of 200, 400, 413, 503, or the body is not a JSON object;
//   - an error answer has no "error" message;
//   - a 200 answer does not have one translation per text, each with the text's own line breaks and the toy's
//     answer on every line, and (n-best) between 1 and n_best entries.
// The first input byte picks limits (max sentences, beam cap: bits 0-1) and an amplification (bits 2-3): with one,
// the rest is read as head \0 open \0 middle \0 close \0 tail and the body is head + open x k + middle +
// close x k + tail, k = 64, 4,096 or 100,000, so that a few bytes reach what a mutator alone never builds:
// nesting 100,000 deep (which crashed parla-serve, issue 36), a 400 KB word, ten thousand texts. Without four
// separators the rest is the body as it is. Seeds in fuzz/corpus_serve/, dictionary fuzz/serve_request.dict.
// Built with clang++ -fsanitize=fuzzer,address,undefined by fuzz/CMakeLists.txt; see fuzz/README.md.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/translation_service.h"

namespace {

using json = nlohmann::json;
using parla::serve::Translation;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant broken: %s\n", what);
    std::abort();
  }
}

// Pieces are bytes (+ 10, so that no id is special); the toy answer is the line's bytes reversed, in hex-free
// printable form: each byte b becomes the letter 'a' + b % 26.
std::vector<int> encode(const std::string& line) {
  std::vector<int> ids;
  for (unsigned char c : line) ids.push_back(static_cast<int>(c) + 10);
  if (ids.size() > 64) ids.resize(64);  // the model's input limit
  return ids;
}

std::string toy(const std::vector<int>& ids) {
  std::string s;
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) s += static_cast<char>('a' + (*it - 10) % 26);
  return s;
}

parla::serve::TranslationService& service(int variant) {
  static std::unique_ptr<parla::serve::TranslationService> services[4];
  auto& s = services[variant];
  if (!s) {
    parla::ServeConfig cfg;
    cfg.max_sentences = variant % 2 ? 4 : 64;
    cfg.max_beam_size = variant / 2 ? 2 : 8;
    cfg.max_queue = 48;
    cfg.max_wait_ms = 0;
    cfg.batch_size = 7;
    parla::DecodingConfig decoding;
    decoding.beam_size = 2;
    s = std::make_unique<parla::serve::TranslationService>(cfg);
    parla::serve::Backend backend;
    backend.search = parla::decode::SearchOptions::from_config(decoding);
    backend.encode = encode;
    backend.decode = [](const std::vector<std::vector<int>>& sources, const parla::decode::SearchOptions& options) {
      std::vector<std::vector<Translation>> out;
      for (const auto& src : sources) {
        check(!src.empty(), "an empty source reached the decoder");
        std::vector<Translation> nbest;
        for (int k = 0; k < options.n_best; ++k) nbest.push_back({toy(src), -1.0f * static_cast<float>(k), 1});
        out.push_back(nbest);
      }
      return out;
    };
    s->start(backend);
  }
  return *s;
}

// The body an input describes (see the top of this file).
std::string body_of(const uint8_t* data, size_t size) {
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  static const size_t kRepeat[4] = {1, 64, 4096, 100000};
  const size_t k = kRepeat[(data[0] >> 2) & 3];
  if (k == 1) return rest;
  std::vector<std::string> parts;
  size_t start = 0;
  for (int i = 0; i < 4; ++i) {
    const size_t z = rest.find('\0', start);
    if (z == std::string::npos) return rest;
    parts.push_back(rest.substr(start, z - start));
    start = z + 1;
  }
  parts.push_back(rest.substr(start));
  // At most about 2 MiB (twice serve.max_request_bytes' default, which the HTTP layer enforces before this).
  const size_t reps = std::min(k, (size_t{2} << 20) / std::max<size_t>(1, parts[1].size() + parts[3].size()));
  std::string body = parts[0];
  for (size_t i = 0; i < reps; ++i) body += parts[1];
  body += parts[2];
  for (size_t i = 0; i < reps; ++i) body += parts[3];
  return body + parts[4];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int variant = data[0] % 4;
  const std::string body = body_of(data, size);
  auto reply = service(variant).translate(body);
  check(reply.status == 200 || reply.status == 400 || reply.status == 413 || reply.status == 503,
        "unexpected status");
  // Errors quote the client's bytes as excerpts: an answer never grows with the body.
  if (reply.status != 200) check(reply.body.size() < 1024, "an error answer longer than 1 KB");
  json answer;
  try {
    answer = json::parse(reply.body);
  } catch (const json::exception&) {
    check(false, "the answer is not JSON");
  }
  check(answer.is_object(), "the answer is not a JSON object");
  if (reply.status != 200) {
    check(answer.contains("error") && answer["error"].is_string() && !answer["error"].get<std::string>().empty(),
          "an error answer without a message");
    return 0;
  }
  // A 200 answer: the body was a valid request, so it parses again.
  const json request = json::parse(body);
  std::vector<std::string> texts;
  if (request.contains("text")) {
    texts.push_back(request["text"].get<std::string>());
    check(answer.contains("translation"), "a text answered without \"translation\"");
  } else {
    texts = request["texts"].get<std::vector<std::string>>();
    check(answer.contains("translations") && answer["translations"].size() == texts.size(),
          "not one translation per text");
  }
  const int n_best = request.value("n_best", 1);
  for (size_t t = 0; t < texts.size(); ++t) {
    const json& entry = request.contains("text") ? answer["translation"] : answer["translations"][t];
    const json best = n_best == 1 ? entry : entry.at(0).at("text");
    check(best.is_string(), "a translation is not a string");
    // Reference: split the text on '\n' and apply the toy to each line.
    std::string expected, line;
    size_t start = 0;
    const std::string& text = texts[t];
    for (;;) {
      const size_t nl = text.find('\n', start);
      line = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      expected += toy(encode(line));
      if (nl == std::string::npos) break;
      expected += '\n';
      start = nl + 1;
    }
    check(best.get<std::string>() == expected, "a translation is not its text's lines, each translated in place");
    // An empty line has one (empty) translation, so a text's list may be shorter than n_best, never empty.
    if (n_best > 1) check(!entry.empty() && entry.size() <= static_cast<size_t>(n_best), "n-best list size");
  }
  return 0;
}

#pragma once
// The body of POST /translate, parsed and validated before any work is queued (torch-free, fuzzed by
// fuzz/fuzz_serve_request.cpp):
//   {"text": "..."}                    -> {"translation": "..."}
//   {"texts": ["...", ...]}            -> {"translations": ["...", ...]}
//   optional "beam_size" (1..serve.max_beam_size) and "n_best" (1..beam size), which override the server's search
//   options for this request; with n_best > 1 each translation is a list of {"text", "score"}, best first (score:
//   the length-normalised log-probability beam search ranks by); for a multilingual model (M2M-100, NLLB),
//   optional "source_lang" and "target_lang" in the model's own codes, which override decoding.source_lang and
//   target_lang (requests for different targets are never batched together: their searches differ).
// A text with line breaks is translated line by line and rejoined with '\n', as parla-translate does with a
// file ("a\nb\n" is three lines, the last empty, so the answer keeps the trailing break). A "\r" before a "\n" is
// part of its line, as parla-translate reads it (the sanitiser turns it into a space).
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "core/config/serve_config.h"
#include "decode/search_options.h"
#include "decode/translation.h"

namespace parla::serve {

// A request that cannot be served: the HTTP status (400, 413) and a message for the JSON error body.
struct RequestError {
  int status;
  std::string message;
};

// A multilingual model's language tokens by code (decode::TranslationModel::language_ids), and the source token that
// encoding puts first unless a request names another language.
struct LanguageIds {
  std::map<std::string, int> codes;
  int default_source = -1;
};

// What a request may ask for, and the search it gets unless it says otherwise (defaults: the config's).
struct RequestLimits {
  LanguageIds languages;  // empty: the model has none, and a request naming one is refused
  size_t max_sentences = static_cast<size_t>(ServeConfig{}.max_sentences);  // lines of all texts together
  int max_beam_size = ServeConfig{}.max_beam_size;
  decode::SearchOptions search;  // the `decoding` keys' search; n_best is cut to a request's smaller beam
};

struct TranslateRequest {
  bool single = true;              // "text" (one string back) rather than "texts" (a list back)
  std::vector<std::string> texts;  // as sent
  // Every line of every text, in order; texts[i] owns lines [line_begin[i], line_begin[i + 1]).
  std::vector<std::string> lines;
  std::vector<size_t> line_begin;
  decode::SearchOptions search;    // the server's, with the request's beam_size, n_best and target language
  int source_language = -1;        // the request's source language token (replaces the default one), or -1
};

// Arrays and objects nested deeper than this are refused while parsing (400); a valid request nests two.
constexpr int kMaxJsonDepth = 16;

// Parses `body`. Returns false and fills `error` for anything that is not a valid request: a body that is not
// UTF-8 or not JSON, nested deeper than kMaxJsonDepth, not an object, without "text"/"texts" or with both, a wrong type, an unknown key, a beam or
// n-best out of range (400), more than max_sentences lines (413).
bool parse_translate_request(const std::string& body, const RequestLimits& limits, TranslateRequest& out,
                             RequestError& error);

// One translation of one line: the detokenised text, its score and length (the decoder's type).
using Translation = decode::Translation;

// The response body for `request`, given each line's n-best list (best first; exactly request.n_best entries
// unless the search found fewer). Lines are rejoined per text with '\n'; with n_best > 1 the k-th entry of a
// multi-line text joins the k-th hypotheses of its lines and sums their scores.
std::string format_translate_response(const TranslateRequest& request,
                                      const std::vector<std::vector<Translation>>& per_line);
// A partial answer (504, serve.request_timeout_s): the same shape, with null for each text that has a line not in
// `done`, and an "error" field saying why.
std::string format_translate_response(const TranslateRequest& request,
                                      const std::vector<std::vector<Translation>>& per_line,
                                      const std::vector<bool>& done, const std::string& error);

// At most `max_bytes` of `s` (cut at a character boundary), marked when cut: what an error message may quote of
// a client's bytes (a field name, a path, a value).
std::string excerpt(const std::string& s, size_t max_bytes = 48);

// {"error": message} (the body of every 4xx and 5xx answer).
std::string error_body(const std::string& message);

}  // namespace parla::serve

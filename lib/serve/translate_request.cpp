#include "serve/translate_request.h"

#include <nlohmann/json.hpp>

#include "core/bounded_json.h"
#include "text/unicode.h"

namespace parla::serve {
namespace {

using json = nlohmann::json;

RequestError bad(const std::string& message) { return {400, message}; }

// "a string", "an array", "a number": what a JSON value is, for messages.
std::string a_type(const json& j) {
  const std::string t = j.type_name();
  return (t[0] == 'a' || t[0] == 'o' ? "an " : "a ") + t;
}

// A value as a message may show it: scalars as a short flat excerpt, containers by their type only. Printing a
// client's value whole would echo up to a megabyte, and dump() recurses into nested arrays (100,000 levels
// overflowed the stack).
std::string describe(const json& j) {
  if (j.is_structured()) return a_type(j);
  return a_type(j) + " (" + excerpt(j.dump(-1, ' ', false, json::error_handler_t::replace)) + ")";
}

// Reads an optional integer field in [lo, hi].
bool read_int(const json& j, const char* key, int lo, int hi, const std::string& hi_reason, int& out,
              RequestError& error) {
  auto it = j.find(key);
  if (it == j.end()) return true;
  if (!it->is_number_integer()) {
    error = bad(std::string("\"") + key + "\" must be an integer, got " + describe(*it));
    return false;
  }
  // A number of 2^63 or more is an unsigned one: reading it as int64_t would wrap it, and the message would quote
  // a number the client never sent, so the client's number is quoted as the parser read it.
  const bool too_large = it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi);
  const auto v = too_large ? int64_t{hi} + 1 : it->get<int64_t>();
  if (v < lo || v > hi) {
    error = bad(std::string("\"") + key + "\" must be between " + std::to_string(lo) + " and " +
                std::to_string(hi) + " (" + hi_reason + "), got " + excerpt(it->dump()));
    return false;
  }
  out = static_cast<int>(v);
  return true;
}

// The body as a JSON object: UTF-8, no NUL, within the depth and value bounds.
bool parse_body(const std::string& body, const RequestLimits& limits, json& j, RequestError& error) {
  // JSON text is UTF-8 (RFC 8259); the parser would also refuse other bytes, but not say where.
  const size_t invalid = text::find_invalid_utf8(body);
  if (invalid != std::string::npos) {
    error = bad("the request body is not valid UTF-8 (byte " + std::to_string(invalid) + ")");
    return false;
  }
  // A raw NUL is never valid JSON (a string must escape it as \u0000, and it is no whitespace), but the parser
  // takes it as the end of its input: JSON, a NUL and garbage would pass as the JSON alone.
  const size_t nul = body.find('\0');
  if (nul != std::string::npos) {
    error = bad("the request body is not valid JSON: it holds a NUL byte (byte " + std::to_string(nul) + ")");
    return false;
  }
  try {
    // The depth is bounded as the parser goes, in time linear in the body (core/bounded_json.h), so no later step,
    // and no destructor, meets a deeper value than kMaxJsonDepth.
    JsonLimits json_limits;
    json_limits.max_depth = kMaxJsonDepth;
    // A request holds one value per sentence and a few more; the bound keeps "[{},{},...]" (about 30 bytes of
    // memory per byte of body) from being built at all.
    json_limits.max_values = limits.max_sentences + 16;
    j = parse_bounded_json(body, json_limits, "the request body");
  } catch (const JsonError& e) {
    if (e.kind() == JsonErrorKind::kTooManyValues) {
      error = {413, "the request body holds more values than the limit of " + std::to_string(limits.max_sentences) +
                        " sentences per request (serve.max_sentences) allows"};
    } else if (e.kind() == JsonErrorKind::kTooDeep) {
      error = bad("the request body nests arrays or objects deeper than " + std::to_string(kMaxJsonDepth) +
                  " levels (a request has two)");
    } else {
      // nlohmann's message quotes the token it stopped at, which can be a whole unterminated string.
      error = bad("the request body is not valid JSON: " + excerpt(e.detail(), 240));
    }
    return false;
  }
  if (!j.is_object()) {
    error = bad("the request body must be a JSON object such as {\"text\": \"...\"}, got " + a_type(j));
    return false;
  }
  return true;
}

// "text" or "texts" (and no unknown field) into out.texts and out.single.
bool read_texts(const json& j, const RequestLimits& limits, TranslateRequest& out, RequestError& error) {
  for (const auto& item : j.items()) {
    const auto& k = item.key();
    if (k != "text" && k != "texts" && k != "beam_size" && k != "n_best" && k != "source_lang" && k != "target_lang") {
      error = bad("unknown field \"" + excerpt(k) + "\" (known: text, texts, beam_size, n_best, source_lang, target_lang)");
      return false;
    }
  }
  const bool has_text = j.contains("text"), has_texts = j.contains("texts");
  if (has_text == has_texts) {
    error = bad(has_text ? "give either \"text\" or \"texts\", not both"
                         : "missing field \"text\" (a string) or \"texts\" (a list of strings)");
    return false;
  }
  if (has_text) {
    if (!j.at("text").is_string()) {
      error = bad("\"text\" must be a string, got " + a_type(j.at("text")));
      return false;
    }
    out.texts.push_back(j.at("text").get<std::string>());
  } else {
    const auto& list = j.at("texts");
    if (!list.is_array()) {
      error = bad("\"texts\" must be a list of strings, got " + a_type(list));
      return false;
    }
    if (list.size() > limits.max_sentences) {
      error = {413, "\"texts\" has " + std::to_string(list.size()) + " entries, more than the limit of " +
                        std::to_string(limits.max_sentences) + " sentences per request (serve.max_sentences)"};
      return false;
    }
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_string()) {
        error = bad("\"texts\"[" + std::to_string(i) + "] must be a string, got " + a_type(list[i]));
        return false;
      }
      out.texts.push_back(list[i].get<std::string>());
    }
  }
  out.single = has_text;

  return true;
}

// "source_lang" and "target_lang": the model's codes, into out.source_language and the search's target prefix.
bool read_languages(const json& j, const RequestLimits& limits, TranslateRequest& out, RequestError& error) {
  auto& search = out.search;
  for (const char* key : {"source_lang", "target_lang"}) {
    if (!j.contains(key)) continue;
    const auto& value = j.at(key);
    if (!value.is_string()) {
      error = bad(std::string("\"") + key + "\" must be a string, got " + a_type(value));
      return false;
    }
    const auto& codes = limits.languages.codes;
    if (codes.empty()) {
      error = bad(std::string("\"") + key + "\": this model has no language codes (only multilingual models do)");
      return false;
    }
    auto it = codes.find(value.get<std::string>());
    if (it == codes.end()) {
      std::string valid;
      for (const auto& [code, id] : codes) valid += (valid.empty() ? "" : ", ") + code;
      error = bad(std::string("\"") + key + "\" \"" + excerpt(value.get<std::string>()) +
                  "\" is not one of the model's languages: " + excerpt(valid, 2400));
      return false;
    }
    if (std::string(key) == "source_lang") {
      out.source_language = it->second;
    } else if (!search.target_prefix.empty()) {  // a multilingual model's prefix starts with its target language
      search.target_prefix[0] = it->second;
    } else {
      search.target_prefix = {it->second};
    }
  }

  return true;
}

// Each text's lines, the unit translated (out.lines, out.line_begin), within serve.max_sentences.
bool split_into_lines(const RequestLimits& limits, TranslateRequest& out, RequestError& error) {
  for (const auto& t : out.texts) {
    out.line_begin.push_back(out.lines.size());
    size_t start = 0;
    for (;;) {
      const size_t nl = t.find('\n', start);
      out.lines.push_back(t.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
      if (out.lines.size() > limits.max_sentences) {
        error = {413, "the request has more than " + std::to_string(limits.max_sentences) +
                          " sentences (lines), the limit per request (serve.max_sentences)"};
        return false;
      }
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
  }
  out.line_begin.push_back(out.lines.size());
  return true;
}

}  // namespace

bool parse_translate_request(const std::string& body, const RequestLimits& limits, TranslateRequest& out,
                             RequestError& error) {
  out = TranslateRequest{};
  json j;
  if (!parse_body(body, limits, j, error) || !read_texts(j, limits, out, error)) return false;
  // The server's search, with what the request overrides.
  out.search = limits.search;
  auto& search = out.search;
  if (!read_int(j, "beam_size", 1, limits.max_beam_size, "serve.max_beam_size", search.beam_size, error))
    return false;
  search.n_best = std::min(search.n_best, search.beam_size);
  if (!read_int(j, "n_best", 1, search.beam_size, "at most the beam size", search.n_best, error)) return false;
  return read_languages(j, limits, out, error) && split_into_lines(limits, out, error);
}

std::string format_translate_response(const TranslateRequest& request,
                                      const std::vector<std::vector<Translation>>& per_line) {
  return format_translate_response(request, per_line, std::vector<bool>(per_line.size(), true), "");
}

std::string format_translate_response(const TranslateRequest& request,
                                      const std::vector<std::vector<Translation>>& per_line,
                                      const std::vector<bool>& done, const std::string& error) {
  const Translation empty;
  auto hyp = [&](size_t line, size_t k) -> const Translation& {
    const auto& list = per_line[line];
    if (list.empty()) return empty;
    return list[std::min(k, list.size() - 1)];
  };
  json answers = json::array();
  for (size_t t = 0; t < request.texts.size(); ++t) {
    const size_t begin = request.line_begin[t], end = request.line_begin[t + 1];
    bool complete = true;
    for (size_t l = begin; l < end; ++l) complete = complete && l < done.size() && done[l];
    if (!complete) {
      answers.push_back(nullptr);
      continue;
    }
    // How many hypotheses this text has: the fewest of its lines' (a line with none, e.g. empty, counts as 1).
    size_t n = static_cast<size_t>(request.search.n_best);
    for (size_t l = begin; l < end; ++l) n = std::min(n, std::max<size_t>(1, per_line[l].size()));
    json entries = json::array();
    for (size_t k = 0; k < n; ++k) {
      std::string text;
      double score = 0;
      for (size_t l = begin; l < end; ++l) {
        if (l > begin) text += '\n';
        text += hyp(l, k).text;
        score += hyp(l, k).score;
      }
      if (request.search.n_best == 1) {
        entries.push_back(text);
      } else {
        entries.push_back({{"text", text}, {"score", score}});
      }
    }
    answers.push_back(request.search.n_best == 1 ? entries[0] : entries);
  }
  json body;
  if (request.single) {
    body["translation"] = answers[0];
  } else {
    body["translations"] = answers;
  }
  if (!error.empty()) body["error"] = error;
  // Invalid UTF-8 cannot reach here (requests are validated and SentencePiece decodes to valid UTF-8); replace
  // rather than throw if it ever did.
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string excerpt(const std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t cut = max_bytes;
  // Back to the start of a UTF-8 character (continuation bytes are 10xxxxxx).
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "... (" + std::to_string(s.size()) + " bytes)";
}

std::string error_body(const std::string& message) {
  return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace parla::serve

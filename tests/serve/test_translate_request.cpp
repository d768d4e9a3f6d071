// POST /translate bodies: every accepted form, every refusal with its status, and the answer's shape.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "serve/translate_request.h"

using parla::serve::format_translate_response;
using parla::serve::parse_translate_request;
using parla::serve::RequestError;
using parla::serve::RequestLimits;
using parla::serve::TranslateRequest;
using parla::serve::Translation;
using json = nlohmann::json;

namespace {

RequestError refusal(const std::string& body, RequestLimits limits = {}) {
  TranslateRequest r;
  RequestError e{0, ""};
  REQUIRE_FALSE(parse_translate_request(body, limits, r, e));
  return e;
}

TranslateRequest accepted(const std::string& body, RequestLimits limits = {}) {
  TranslateRequest r;
  RequestError e{0, ""};
  INFO(e.message);
  REQUIRE(parse_translate_request(body, limits, r, e));
  return r;
}

}  // namespace

TEST_CASE("a request with text or texts is split into lines exactly at each line break") {
  auto one = accepted(R"({"text": "Hallo Welt"})");
  CHECK(one.single);
  CHECK(one.lines == std::vector<std::string>{"Hallo Welt"});
  CHECK(one.search.beam_size == 5);
  CHECK(one.search.n_best == 1);

  // Reference: a text with k line breaks is k + 1 lines, whatever they hold (empty, \r, trailing break).
  const std::vector<std::string> texts = {"a\nb", "a\nb\n", "\n", "", "x\r\ny", "\n\nz\n\n"};
  json list = texts;
  auto many = accepted(json{{"texts", list}, {"beam_size", 3}, {"n_best", 2}}.dump());
  CHECK_FALSE(many.single);
  CHECK(many.search.beam_size == 3);
  CHECK(many.search.n_best == 2);
  REQUIRE(many.line_begin.size() == texts.size() + 1);
  for (size_t t = 0; t < texts.size(); ++t) {
    const size_t breaks = static_cast<size_t>(std::count(texts[t].begin(), texts[t].end(), '\n'));
    CHECK(many.line_begin[t + 1] - many.line_begin[t] == breaks + 1);
    std::string joined;
    for (size_t l = many.line_begin[t]; l < many.line_begin[t + 1]; ++l)
      joined += (l > many.line_begin[t] ? "\n" : "") + many.lines[l];
    CHECK(joined == texts[t]);
  }
}

TEST_CASE("the config's beam size and n-best are a request's defaults") {
  RequestLimits limits;
  limits.search.beam_size = 4;
  limits.search.n_best = 2;
  auto r = accepted(R"({"text": "x"})", limits);
  CHECK(r.search.beam_size == 4);
  CHECK(r.search.n_best == 2);
  // A smaller beam caps the default n-best rather than failing.
  CHECK(accepted(R"({"text": "x", "beam_size": 1})", limits).search.n_best == 1);
}

TEST_CASE("a request overrides beam size and n-best on a copy of the server's search options, nothing else") {
  RequestLimits limits;
  limits.search.length_penalty = 0.25;
  limits.search.min_length = 2;
  limits.search.max_length_offset = 7;
  auto r = accepted(R"({"text": "x", "beam_size": 3, "n_best": 2})", limits);
  auto expected = limits.search;
  expected.beam_size = 3;
  expected.n_best = 2;
  CHECK(r.search == expected);
  CHECK(accepted(R"({"text": "x"})", limits).search == limits.search);
  CHECK(limits.search.beam_size == parla::DecodingConfig{}.beam_size);  // untouched by the requests
}

TEST_CASE("every malformed request is refused with 400 and a message naming what is wrong") {
  struct Case {
    std::string body, expect;
  };
  const std::vector<Case> cases = {
      {"", "not valid JSON"},
      {"{\"text\": \"a\"", "not valid JSON"},
      {"[\"a\"]", "must be a JSON object"},
      {"\"a\"", "must be a JSON object"},
      {"{}", "missing field"},
      {R"({"text": "a", "texts": ["b"]})", "not both"},
      {R"({"text": 5})", "\"text\" must be a string"},
      {R"({"text": null})", "\"text\" must be a string"},
      {R"({"texts": "a"})", "\"texts\" must be a list"},
      {R"({"texts": ["a", 3]})", "\"texts\"[1] must be a string"},
      {R"({"text": "a", "beam": 5})", "unknown field \"beam\""},
      {R"({"text": "a", "beam_size": 0})", "\"beam_size\" must be between 1 and 10"},
      {R"({"text": "a", "beam_size": 11})", "serve.max_beam_size"},
      {R"({"text": "a", "beam_size": 2.5})", "\"beam_size\" must be an integer"},
      {R"({"text": "a", "beam_size": "5"})", "\"beam_size\" must be an integer"},
      {R"({"text": "a", "beam_size": true})", "\"beam_size\" must be an integer"},
      {R"({"text": "a", "beam_size": 3, "n_best": 4})", "\"n_best\" must be between 1 and 3"},
      {R"({"text": "a", "n_best": 0})", "\"n_best\" must be between 1"},
      {R"({"text": "a", "beam_size": 99999999999999999999})", "\"beam_size\""},
      {"{\"text\": \"\xC3\x28\"}", "not valid UTF-8 (byte 10)"},
      {"{\"text\": \"a\xFF\"}", "not valid UTF-8"},
      {R"({"text": "\ud800"})", "not valid JSON"},  // a lone surrogate escape
  };
  for (const auto& c : cases) {
    INFO(c.body);
    auto e = refusal(c.body);
    CHECK(e.status == 400);
    CHECK_THAT(e.message, Catch::Contains(c.expect));
  }
}

TEST_CASE("a beam size of 2^63 or more is refused quoting the client's number, not a wrapped one (issue 59)") {
  // 2^63 + 3 read as int64_t wraps to a negative number; the message must quote what was sent.
  for (const std::string n : {"9223372036854775811", "9223372036854775808", "18446744073709551615"}) {
    INFO(n);
    auto e = refusal(R"({"text": "a", "beam_size": )" + n + "}");
    CHECK(e.status == 400);
    CHECK(e.message == "\"beam_size\" must be between 1 and 10 (serve.max_beam_size), got " + n);
  }
  auto negative = refusal(R"({"text": "a", "beam_size": -5})");
  CHECK_THAT(negative.message, Catch::EndsWith("got -5"));
  auto n_best = refusal(R"({"text": "a", "beam_size": 2, "n_best": 9223372036854775808})");
  CHECK_THAT(n_best.message, Catch::EndsWith("got 9223372036854775808"));
}

TEST_CASE("JSON followed by a NUL byte and garbage is refused with 400 (issue 59)") {
  const std::string valid = R"({"text": "a"})";
  accepted(valid);
  for (const std::string tail : {std::string("\0", 1), std::string("\0garbage", 8), std::string("  \0{}", 5)}) {
    auto e = refusal(valid + tail);
    CHECK(e.status == 400);
    CHECK_THAT(e.message, Catch::Contains("NUL byte (byte " + std::to_string(valid.size() + tail.find('\0')) + ")"));
  }
  // Inside a string a NUL is refused too (JSON requires \u0000 there), and the escaped form is accepted.
  CHECK(refusal(std::string("{\"text\": \"a\0b\"}", 15)).status == 400);
  CHECK(accepted(R"({"text": "a\u0000b"})").texts[0] == std::string("a\0b", 3));
}

TEST_CASE("more sentences than serve.max_sentences, as texts or as lines, is 413") {
  RequestLimits limits;
  limits.max_sentences = 3;
  CHECK(accepted(R"({"text": "a\nb\nc"})", limits).lines.size() == 3);
  auto lines = refusal(R"({"text": "a\nb\nc\nd"})", limits);
  CHECK(lines.status == 413);
  CHECK_THAT(lines.message, Catch::Contains("serve.max_sentences"));
  CHECK(refusal(R"({"texts": ["a", "b", "c", "d"]})", limits).status == 413);
  CHECK(refusal(R"({"texts": ["a\nb", "c\nd"]})", limits).status == 413);
}

TEST_CASE("the answer rejoins each text's lines and has the request's shape") {
  auto single = accepted(R"({"text": "a\n\nb"})");
  std::vector<std::vector<Translation>> per_line = {{{"A", -1.f, 1}}, {}, {{"B", -2.f, 1}}};
  CHECK(json::parse(format_translate_response(single, per_line)) == json{{"translation", "A\n\nB"}});

  auto many = accepted(R"({"texts": ["a", "b\nc"]})");
  per_line = {{{"A", -1.f, 1}}, {{"B", -2.f, 1}}, {{"C", -3.f, 1}}};
  CHECK(json::parse(format_translate_response(many, per_line)) == json{{"translations", {"A", "B\nC"}}});

  // n-best: the k-th entry joins the k-th hypotheses of the lines and sums their scores.
  auto nbest = accepted(R"({"texts": ["a\nb"], "beam_size": 2, "n_best": 2})");
  per_line = {{{"A1", -1.f, 1}, {"A2", -1.5f, 1}}, {{"B1", -2.f, 1}, {"B2", -2.25f, 1}}};
  auto j = json::parse(format_translate_response(nbest, per_line));
  REQUIRE(j["translations"][0].size() == 2);
  CHECK(j["translations"][0][0]["text"] == "A1\nB1");
  CHECK(j["translations"][0][0]["score"].get<double>() == Approx(-3.0));
  CHECK(j["translations"][0][1]["text"] == "A2\nB2");
  CHECK(j["translations"][0][1]["score"].get<double>() == Approx(-3.75));
}

TEST_CASE("a body nested deeper than kMaxJsonDepth is refused while parsing, whatever its depth") {
  using parla::serve::kMaxJsonDepth;
  for (int depth : {kMaxJsonDepth + 1, 1000, 100000}) {
    INFO("depth " << depth);
    const std::string body =
        R"({"text": "a", "beam_size": )" + std::string(static_cast<size_t>(depth), '[') +
        std::string(static_cast<size_t>(depth), ']') + "}";
    auto e = refusal(body);
    CHECK(e.status == 400);
    CHECK_THAT(e.message, Catch::Contains("deeper than " + std::to_string(kMaxJsonDepth)));
    CHECK(e.message.size() < 200);
  }
  // Just within the limit: parsed, then refused for its type, the value not printed.
  const int inside = kMaxJsonDepth - 1;  // the object itself is the first level
  auto e = refusal(R"({"text": "a", "beam_size": )" + std::string(static_cast<size_t>(inside), '[') +
                   std::string(static_cast<size_t>(inside), ']') + "}");
  CHECK(e.message == "\"beam_size\" must be an integer, got an array");
}

TEST_CASE("messages quote a client's bytes as a short excerpt, never whole") {
  const std::string huge(100000, 'x');
  auto key = refusal(R"({"text": "a", ")" + huge + R"(": 1})");
  CHECK_THAT(key.message, Catch::Contains("unknown field \"xxx"));
  CHECK_THAT(key.message, Catch::Contains("(100000 bytes)"));
  CHECK(key.message.size() < 200);
  auto value = refusal(R"({"text": "a", "beam_size": ")" + huge + R"("})");
  CHECK(value.message.size() < 200);
  CHECK_THAT(value.message, Catch::StartsWith("\"beam_size\" must be an integer, got a string (\"xxx"));
  auto unterminated = refusal(R"({"text": ")" + huge);
  CHECK_THAT(unterminated.message, Catch::Contains("not valid JSON"));
  CHECK(unterminated.message.size() < 400);
  // A cut never splits a UTF-8 character.
  const std::string umlauts = [] {
    std::string s;
    for (int i = 0; i < 40; ++i) s += "\xC3\xBC";
    return s;
  }();
  const std::string cut = parla::serve::excerpt(umlauts, 47);
  CHECK(cut.substr(0, 46) == umlauts.substr(0, 46));
  CHECK(cut.substr(46, 4) == "... ");
}

TEST_CASE("a multilingual model's requests name source_lang and target_lang in its codes: the target's token "
          "replaces the forced one, the source's is kept for encoding, an unknown code is refused listing the valid ones") {
  RequestLimits limits;
  limits.languages.codes = {{"deu_Latn", 122}, {"eng_Latn", 127}, {"fra_Latn", 137}};
  limits.languages.default_source = 127;
  limits.search.target_prefix = {122, 40, 41};  // the server's: its target language, then decoding.target_prefix
  auto plain = accepted(R"({"text": "a"})", limits);
  CHECK(plain.search.target_prefix == std::vector<int64_t>{122, 40, 41});
  CHECK(plain.source_language == -1);
  auto r = accepted(R"({"text": "a", "target_lang": "fra_Latn", "source_lang": "deu_Latn"})", limits);
  CHECK(r.search.target_prefix == std::vector<int64_t>{137, 40, 41});
  CHECK(r.source_language == 122);
  CHECK(r.search != plain.search);  // never batched together
  auto unknown = refusal(R"({"text": "a", "target_lang": "xx_Latn"})", limits);
  CHECK(unknown.status == 400);
  CHECK_THAT(unknown.message, Catch::Contains("xx_Latn") && Catch::Contains("deu_Latn, eng_Latn, fra_Latn"));
  CHECK_THAT(refusal(R"({"text": "a", "source_lang": 7})", limits).message, Catch::Contains("must be a string"));
  // A model without languages refuses them.
  CHECK_THAT(refusal(R"({"text": "a", "target_lang": "deu_Latn"})").message, Catch::Contains("no language codes"));
}

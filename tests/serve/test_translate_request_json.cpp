// The request body's JSON parse (core/bounded_json.h through parse_translate_request): what nlohmann's parse let
// through or took long over.
#include <catch2/catch.hpp>

#include <ctime>
#include <string>

#include "serve/translate_request.h"

using Catch::Contains;
using parla::serve::RequestError;
using parla::serve::RequestLimits;
using parla::serve::TranslateRequest;

namespace {

RequestError json_refusal(const std::string& body, const RequestLimits& limits = {}) {
  TranslateRequest out;
  RequestError error{0, ""};
  CHECK_FALSE(parse_translate_request(body, limits, out, error));
  return error;
}

}  // namespace

TEST_CASE("a request body of JSON followed by a NUL byte and more is refused with 400") {
  const std::string body("{\"text\": \"a\"}\0garbage", 22);
  const auto e = json_refusal(body);
  CHECK(e.status == 400);
  CHECK_THAT(e.message, Contains("not valid JSON") && Contains("NUL"));
}

TEST_CASE("a request body of more values than serve.max_sentences allows is refused with 413 before it is built") {
  RequestLimits limits;
  limits.max_sentences = 100;
  std::string body = "{\"texts\": [{}";
  for (int i = 0; i < 200000; ++i) body += ",{}";
  body += "]}";
  const auto t0 = std::clock();
  const auto e = json_refusal(body, limits);
  CHECK(e.status == 413);
  CHECK_THAT(e.message, Contains("serve.max_sentences"));
  // Refused at the 117th value: far less CPU than building 200,000 objects (no absolute bound, just a sanity one).
  CHECK(double(std::clock() - t0) / CLOCKS_PER_SEC < 1.0);
  // Within the bound the request's own checks answer as before.
  CHECK_THAT(json_refusal(R"({"texts": [{}, {}]})", limits).message, Contains("texts"));
}

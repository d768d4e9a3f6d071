// TranslationService without HTTP: the loading, ready and stopping states and what each answers.
#include <atomic>
#include <cctype>
#include <chrono>
#include <mutex>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "serve/translation_service.h"

using namespace parla::serve;
using namespace std::chrono_literals;

namespace {

// Upper-cases each line. While *gate is set, a batch waits in the decoder (after counting itself in *entered).
Backend upper_backend(std::chrono::milliseconds delay = 0ms, std::atomic<bool>* gate = nullptr,
                      std::atomic<int>* entered = nullptr) {
  Backend b;
  b.encode = [](const std::string& line) {
    std::vector<int> ids;
    for (unsigned char c : line) ids.push_back(c);
    return ids;
  };
  b.decode = [delay, gate, entered](const std::vector<std::vector<int>>& sources, const SearchOptions&) {
    if (entered) ++*entered;
    while (gate && *gate) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(delay);
    std::vector<std::vector<Translation>> out;
    for (const auto& s : sources) {
      std::string t;
      for (int c : s) t += static_cast<char>(std::toupper(c));
      out.push_back({Translation{t, -1.f, s.size()}});
    }
    return out;
  };
  return b;
}

}  // namespace

TEST_CASE("before the model is loaded, health and translate answer 503 with Retry-After, and 200 once it is") {
  TranslationService service(parla::ServeConfig{}, parla::DecodingConfig{});
  CHECK(service.health().status == 503);
  CHECK(service.health().retry_after == 1);
  auto early = service.translate(R"({"text": "abc"})");
  CHECK(early.status == 503);
  CHECK(early.retry_after == 1);
  CHECK_THAT(early.body, Catch::Contains("loading"));
  service.start(upper_backend());
  CHECK(service.health().status == 200);
  auto r = service.translate(R"({"texts": ["abc", "d\ne", ""]})");
  REQUIRE(r.status == 200);
  CHECK(nlohmann::json::parse(r.body) == nlohmann::json{{"translations", {"ABC", "D\nE", ""}}});
  const std::string m = service.metrics().body;
  CHECK_THAT(m, Catch::Contains("parla_ready 1"));
  CHECK_THAT(m, Catch::Contains("parla_requests_total{code=\"503\"} 1"));
  CHECK_THAT(m, Catch::Contains("parla_requests_total{code=\"200\"} 1"));
  CHECK_THAT(m, Catch::Contains("parla_requests_in_flight 0"));
}

TEST_CASE("after stop_accepting new requests get 503 while those in flight finish, and fail_waiting answers 503") {
  parla::ServeConfig cfg;
  cfg.batch_size = 1;
  cfg.max_wait_ms = 0;
  TranslationService service(cfg, parla::DecodingConfig{});
  std::atomic<bool> gate{true};
  std::atomic<int> entered{0};
  service.start(upper_backend(0ms, &gate, &entered));
  Reply in_flight, drained;
  std::thread a([&] { in_flight = service.translate(R"({"text": "abc"})"); });
  while (entered == 0) std::this_thread::sleep_for(1ms);  // "abc" is being decoded
  std::thread b([&] { drained = service.translate(R"({"texts": ["x", "y", "z", "w", "v"]})"); });
  while (service.metrics().body.find("parla_queue_sentences 5\n") == std::string::npos)
    std::this_thread::sleep_for(1ms);  // and b's five sentences wait behind it
  service.stop_accepting();
  CHECK(service.health().status == 503);
  CHECK(service.translate(R"({"text": "late"})").status == 503);
  service.fail_waiting();
  gate = false;
  a.join();
  b.join();
  CHECK(in_flight.status == 200);
  CHECK(drained.status == 503);
  CHECK_THAT(drained.body, Catch::Contains("drain timeout"));
  service.shutdown();
}

TEST_CASE("a client that goes away while waiting gets its work cancelled and is counted as 499") {
  parla::ServeConfig cfg;
  cfg.batch_size = 1;
  cfg.max_wait_ms = 0;
  TranslationService service(cfg, parla::DecodingConfig{});
  service.start(upper_backend(20ms));
  auto r = service.translate(R"({"texts": ["a", "b", "c", "d", "e", "f", "g", "h"]})", [] { return true; }, 5ms);
  CHECK(r.status == 499);
  std::this_thread::sleep_for(100ms);
  const std::string m = service.metrics().body;
  CHECK_THAT(m, Catch::Contains("parla_requests_total{code=\"499\"} 1"));
  CHECK_THAT(m, !Catch::Contains("parla_dropped_sentences_total 0\n"));
}

TEST_CASE("the decoder searches with the decoding section's options and each request's beam size and n-best") {
  parla::ServeConfig cfg;
  cfg.max_wait_ms = 0;
  cfg.max_beam_size = 6;
  parla::DecodingConfig decoding;
  decoding.beam_size = 8;  // more than serve.max_beam_size: requests get 6 unless they ask for less
  decoding.n_best = 2;
  decoding.length_penalty = 0.3;
  decoding.min_length = 1;
  TranslationService service(cfg, decoding);
  std::mutex mutex;
  std::vector<parla::decode::SearchOptions> seen;
  Backend b = upper_backend();
  auto upper = b.decode;
  b.decode = [&, upper](const std::vector<std::vector<int>>& sources, const SearchOptions& o) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      seen.push_back(o);
    }
    auto out = upper(sources, o);
    for (auto& n : out) n.resize(static_cast<size_t>(o.n_best), n[0]);
    return out;
  };
  service.start(b);
  REQUIRE(service.translate(R"({"text": "a"})").status == 200);
  REQUIRE(service.translate(R"({"text": "b", "beam_size": 1})").status == 200);
  REQUIRE(service.translate(R"({"text": "c", "beam_size": 4, "n_best": 3})").status == 200);
  service.shutdown();
  auto expected = parla::decode::SearchOptions::from_config(decoding);
  REQUIRE(seen.size() == 3);
  expected.beam_size = 6;
  CHECK(seen[0] == expected);
  expected.beam_size = 1;
  expected.n_best = 1;  // the default n-best, cut to the request's beam
  CHECK(seen[1] == expected);
  expected.beam_size = 4;
  expected.n_best = 3;
  CHECK(seen[2] == expected);
}

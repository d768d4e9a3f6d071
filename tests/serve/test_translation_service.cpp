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
// Requests start from the search `decoding` describes, as parla-serve's start from its model's.
Backend upper_backend(std::chrono::milliseconds delay = 0ms, std::atomic<bool>* gate = nullptr,
                      std::atomic<int>* entered = nullptr, const parla::DecodingConfig& decoding = {}) {
  Backend b;
  b.search = SearchOptions::from_config(decoding);
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
  TranslationService service(parla::ServeConfig{});
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
  TranslationService service(cfg);
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
  TranslationService service(cfg);
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
  TranslationService service(cfg);
  std::mutex mutex;
  std::vector<parla::decode::SearchOptions> seen;
  Backend b = upper_backend(0ms, nullptr, nullptr, decoding);
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

// Issue 59: bounded decoding work.

TEST_CASE("a request past serve.request_timeout_s gets 504 with the lines done so far and null for the rest") {
  parla::ServeConfig cfg;
  cfg.batch_size = 1;
  cfg.max_wait_ms = 0;
  cfg.request_timeout_s = 0.3;
  TranslationService service(cfg);
  std::atomic<int> batches{0};
  Backend b = upper_backend(50ms, nullptr, &batches);
  service.start(b);
  std::vector<std::string> lines;
  for (int i = 0; i < 40; ++i) lines.push_back("line" + std::to_string(i));
  const auto start = std::chrono::steady_clock::now();
  auto r = service.translate(nlohmann::json{{"texts", lines}}.dump());
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(r.status == 504);
  CHECK(took < 0.3 + 0.2);  // at the deadline, not after the 40 x 50 ms the whole request would take
  const auto j = nlohmann::json::parse(r.body);
  CHECK_THAT(j["error"].get<std::string>(), Catch::Contains("serve.request_timeout_s"));
  REQUIRE(j["translations"].size() == lines.size());
  size_t done = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (j["translations"][i].is_null()) continue;
    ++done;
    std::string upper = lines[i];
    for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    CHECK(j["translations"][i] == upper);
  }
  // Some lines were done (about 0.3 s / 50 ms), most were not.
  CHECK(done >= 1);
  CHECK(done < lines.size());
  // The rest never reaches the decoder: at most the batch running at the deadline finishes after it.
  const int at_deadline = batches.load();
  std::this_thread::sleep_for(300ms);
  CHECK(batches.load() <= at_deadline + 1);
  CHECK(batches.load() <= static_cast<int>(0.3 / 0.05) + 2);
  CHECK_THAT(service.metrics().body, Catch::Contains("parla_requests_total{code=\"504\"} 1"));
  // One line only: "translation" is null.
  cfg.request_timeout_s = 0.05;
  TranslationService slow(cfg);
  slow.start(upper_backend(200ms));
  auto one = slow.translate(R"({"text": "abc"})");
  CHECK(one.status == 504);
  CHECK(nlohmann::json::parse(one.body)["translation"].is_null());
}

TEST_CASE("serve.max_queued_cost bounds the queue by beam x allowed output length, not sentences: 503 beyond") {
  parla::ServeConfig cfg;
  cfg.batch_size = 1;
  cfg.max_wait_ms = 0;
  parla::DecodingConfig decoding;  // max output length = floor(3 x source pieces + 10)
  decoding.max_length_factor = 3;
  decoding.max_length_offset = 10;
  // The reference cost, by hand: a line of 10 characters (10 ids) at beam 4 costs 4 x (3 x 10 + 10) = 160.
  const std::string ten = "abcdefghij";
  cfg.max_queued_cost = 4 * 160 + 100;  // four such lines fit, a fifth does not
  TranslationService service(cfg);
  std::atomic<bool> gate{true};
  std::atomic<int> entered{0};
  service.start(upper_backend(0ms, &gate, &entered, decoding));
  Reply first, queued;
  std::thread a([&] { first = service.translate(R"({"text": "x", "beam_size": 4})"); });
  while (entered == 0) std::this_thread::sleep_for(1ms);  // "x" is in the decoder, nothing waits
  const std::string four = nlohmann::json{{"texts", {ten, ten, ten, ten}}, {"beam_size", 4}}.dump();
  std::thread b([&] { queued = service.translate(four); });
  while (service.metrics().body.find("parla_queued_cost 640\n") == std::string::npos)
    std::this_thread::sleep_for(1ms);
  // A fifth line of the same cost is refused; at beam 1 it costs 40 and fits.
  auto refused = service.translate(nlohmann::json{{"text", ten}, {"beam_size", 4}}.dump());
  CHECK(refused.status == 503);
  CHECK(refused.retry_after >= 1);
  CHECK_THAT(refused.body, Catch::Contains("serve.max_queued_cost"));
  Reply cheap;
  std::thread c([&] { cheap = service.translate(nlohmann::json{{"text", ten}, {"beam_size", 1}}.dump()); });
  while (service.metrics().body.find("parla_queued_cost 680\n") == std::string::npos)
    std::this_thread::sleep_for(1ms);
  gate = false;
  a.join();
  b.join();
  c.join();
  CHECK(first.status == 200);
  CHECK(queued.status == 200);
  CHECK(cheap.status == 200);
  CHECK_THAT(service.metrics().body, Catch::Contains("parla_queued_cost 0\n"));
}

TEST_CASE("/health reports degraded (503, Retry-After) while the queue holds more than health_max_queued_s") {
  parla::ServeConfig cfg;
  cfg.batch_size = 1;
  cfg.max_wait_ms = 0;
  cfg.health_max_queued_s = 0.2;
  TranslationService service(cfg);
  std::atomic<bool> gate{true};
  std::atomic<int> entered{0};
  service.start(upper_backend(0ms, &gate, &entered));
  CHECK(service.health().status == 200);
  Reply a, b;
  std::thread ta([&] { a = service.translate(R"({"text": "a"})"); });
  while (entered == 0) std::this_thread::sleep_for(1ms);
  std::thread tb([&] { b = service.translate(R"({"text": "b"})"); });
  while (service.metrics().body.find("parla_queue_sentences 1\n") == std::string::npos)
    std::this_thread::sleep_for(1ms);
  CHECK(service.health().status == 200);  // waiting, but not yet for long
  std::this_thread::sleep_for(300ms);
  auto degraded = service.health();
  CHECK(degraded.status == 503);
  CHECK(degraded.retry_after >= 1);
  CHECK_THAT(degraded.body, Catch::Contains("serve.health_max_queued_s"));
  gate = false;
  ta.join();
  tb.join();
  CHECK(a.status == 200);
  CHECK(b.status == 200);
  CHECK(service.health().status == 200);  // healthy again once the queue drained
}

TEST_CASE("a one-line request is answered while 100 long requests with another beam size are queued") {
  parla::ServeConfig cfg;
  cfg.batch_size = 8;
  cfg.max_wait_ms = 0;
  cfg.max_queue = 100000;
  cfg.max_queued_cost = 0;
  cfg.request_timeout_s = 0;
  TranslationService service(cfg);
  std::atomic<bool> gate{true};
  std::atomic<int> entered{0};
  service.start(upper_backend(10ms, &gate, &entered));
  std::vector<std::string> long_lines(64, std::string(200, 'x'));
  const std::string hostile = nlohmann::json{{"texts", long_lines}, {"beam_size", 10}}.dump();
  std::vector<TranslationService::Job> jobs(100);
  for (auto& job : jobs) {
    Reply refused;
    REQUIRE(service.begin(hostile, job, refused));
  }
  gate = false;
  // 100 x 64 sentences at 10 ms per batch of 8 is 8 s; the one-line request must not wait for them.
  const auto start = std::chrono::steady_clock::now();
  auto r = service.translate(R"({"text": "hello", "beam_size": 2})");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(r.status == 200);
  CHECK(nlohmann::json::parse(r.body)["translation"] == "HELLO");
  // Before it: the batch running when it arrived and the batches that start the hostile requests not yet started
  // (8 per batch: 13 batches of 10 ms), not the 800 batches (8 s) of the hostile requests. The floor is 2 s.
  CHECK(took < 2.0);
  for (auto& job : jobs) service.abandon(job);
  service.shutdown();
}

TEST_CASE("/health is degraded while one static batch decodes longer than health_max_queued_s, nothing waiting") {
  parla::ServeConfig cfg;
  cfg.max_wait_ms = 0;
  cfg.health_max_queued_s = 0.2;
  TranslationService service(cfg);
  std::atomic<bool> gate{true};
  std::atomic<int> entered{0};
  service.start(upper_backend(0ms, &gate, &entered));
  Reply a;
  std::thread ta([&] { a = service.translate(R"({"text": "a"})"); });
  while (entered == 0) std::this_thread::sleep_for(1ms);
  CHECK(service.health().status == 200);
  std::this_thread::sleep_for(300ms);  // the batch has decoded for 0.3 s; a request sent now would wait as long
  CHECK(service.health().status == 503);
  gate = false;
  ta.join();
  CHECK(a.status == 200);
  CHECK(service.health().status == 200);
}

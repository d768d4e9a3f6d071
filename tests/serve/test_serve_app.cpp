// parla-serve end to end over loopback, with httplib's client as the HTTP client: answers equal parla-translate's
// line by line under many concurrent clients, every refusal, overload, a client that leaves, graceful shutdown
// with requests in flight, and a port in use. The model is a tiny random Transformer with a SentencePiece model
// trained here (its translations are nonsense, but deterministic, which is all equality needs).
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "support/run.h"
#include "support/files.h"
#include "support/hf_m2m100_fixture.h"
#include "support/marian_folder.h"
#include "support/temp_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/toy_parallel.h"

using parla::testing::run;
using parla::testing::TempDir;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {


struct Fixture {
  TempDir dir{"serve-app"};
  std::string checkpoint;
  std::vector<std::string> lines;  // test sentences, some empty, one with invalid UTF-8 replaced, one long
  std::vector<std::string> reference;  // parla-translate's output for them, beam 3

  Fixture() {
    checkpoint = dir.file("model.pt");
    parla::testing::write_tiny_checkpoint(checkpoint, 11);
    const auto& words = parla::testing::toy_words();
    for (int i = 0; i < 96; ++i) {
      std::string line;
      if (i % 17 != 5)
        for (int j = 0; j < 1 + (i * 7) % 12; ++j) line += words[static_cast<size_t>((i + j * 5) % 12)] + " ";
      lines.push_back(line);
    }
    lines.push_back("a \x01 dog");  // a control character
    std::string text;
    for (const auto& l : lines) text += l + "\n";
    const std::string input = dir.write("input.txt", text);
    auto r = run("parla-translate", {"-m", checkpoint, "-i", input, "-b", "3", "--threads", "1"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    reference = parla::testing::split_lines(r.out);
    REQUIRE(reference.size() == lines.size());
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

// A parla-serve process: started with `args`, its stderr in a file, stopped by a signal.
struct Server {
  pid_t pid = -1;
  int port = 0;
  std::string log;

  explicit Server(const std::vector<std::string>& args, bool wait_ready = true) {
    static int counter = 0;
    log = std::string(PARLA_TEST_TMP_DIR) + "/serve-" + std::to_string(getpid()) + "-" + std::to_string(counter++) +
          ".err";
    std::vector<std::string> argv_s = {std::string(PARLA_BIN_DIR) + "/parla-serve", "--port", "0", "--threads",
                                       "1"};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    pid = fork();
    if (pid == 0) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 2);
      int null = open("/dev/null", O_RDWR);
      dup2(null, 0);
      dup2(null, 1);
      std::vector<char*> argv;
      for (auto& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    if (wait_ready) REQUIRE(wait_for_log("ready:"));
    const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    std::smatch m;
    const std::string text = parla::testing::read_file(log);
    if (std::regex_search(text, m, listening)) port = std::stoi(m[1]);
  }
  ~Server() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    std::remove(log.c_str());
  }
  bool wait_for_log(const std::string& what, std::chrono::seconds limit = std::chrono::seconds(60)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (parla::testing::read_file(log).find(what) != std::string::npos) return true;
      int status;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return parla::testing::read_file(log).find(what) != std::string::npos;
      }
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }
  // Sends `signo` and returns the exit code (or 128 + the signal that killed it).
  int stop(int signo = SIGTERM) {
    kill(pid, signo);
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    return c;
  }
};

json post(const Server& s, const json& body, int expect_status = 200) {
  auto c = s.client();
  auto res = c.Post("/translate", body.dump(), "application/json");
  REQUIRE(res);
  INFO(res->body);
  REQUIRE(res->status == expect_status);
  return json::parse(res->body);
}

}  // namespace

TEST_CASE("64 concurrent clients get parla-translate's translations, line by line, with static and with "
          "continuous batching", "[serve_app]") {
  auto& f = fixture();
  const bool continuous = GENERATE(false, true);
  INFO((continuous ? "continuous" : "static") << " batching");
  std::vector<std::string> args{"-m", f.checkpoint, "-b", "3", "--batch-size", "32", "--max-wait-ms", "20"};
  if (continuous) args.push_back("--continuous");
  Server s(args);
  REQUIRE(s.port > 0);
  std::vector<std::string> got(f.lines.size());
  std::atomic<size_t> next{0};
  std::atomic<int> failures{0};
  std::mutex mutex;
  std::string why;
  std::vector<std::thread> clients;
  for (int c = 0; c < 64; ++c) {
    clients.emplace_back([&] {
      auto client = s.client();
      for (size_t i = next++; i < f.lines.size(); i = next++) {
        auto res = client.Post("/translate", json{{"text", f.lines[i]}}.dump(), "application/json");
        if (!res || res->status != 200) {
          ++failures;
          std::lock_guard<std::mutex> lock(mutex);
          why += res ? "status " + std::to_string(res->status) + ": " + res->body + "\n"
                     : "client error " + httplib::to_string(res.error()) + "\n";
          continue;
        }
        got[i] = json::parse(res->body)["translation"].get<std::string>();
      }
    });
  }
  for (auto& t : clients) t.join();
  INFO(why);
  REQUIRE(failures == 0);
  for (size_t i = 0; i < f.lines.size(); ++i) {
    INFO("line " << i + 1 << ": " << f.lines[i]);
    CHECK(got[i] == f.reference[i]);
  }
  // Requests were batched together: some batch held more than one request.
  auto c = s.client();
  auto m = c.Get("/metrics");
  REQUIRE(m);
  CHECK(m->status == 200);
  CHECK_THAT(m->get_header_value("Content-Type"), Catch::Contains("text/plain"));
  const std::regex single("parla_batch_requests_bucket\\{le=\"1\"\\} ([0-9]+)");
  const std::regex all("parla_batch_requests_count ([0-9]+)");
  std::smatch a, b;
  REQUIRE(std::regex_search(m->body, a, single));
  REQUIRE(std::regex_search(m->body, b, all));
  CHECK(std::stoi(a[1]) < std::stoi(b[1]));
  CHECK_THAT(m->body, Catch::Contains("parla_requests_total{code=\"200\"} " + std::to_string(f.lines.size())));

  // One request with every line as one text, and as a list: the same translations, rejoined.
  std::string text;
  std::string expected;
  json texts = json::array();
  for (size_t i = 0; i < f.lines.size(); ++i) {
    text += (i ? "\n" : "") + f.lines[i];
    expected += (i ? "\n" : "") + f.reference[i];
    texts.push_back(f.lines[i]);
  }
  CHECK(post(s, {{"text", text}})["translation"] == expected);
  CHECK(post(s, {{"texts", texts}})["translations"] == json(f.reference));
  CHECK(s.stop() == 0);
}

TEST_CASE("n-best and beam size per request equal parla-translate's with the same options", "[serve_app]") {
  auto& f = fixture();
  const bool continuous = GENERATE(false, true);
  INFO((continuous ? "continuous" : "static") << " batching");
  std::vector<std::string> args{"-m", f.checkpoint};
  if (continuous) args.push_back("--continuous");
  Server s(args);
  std::vector<std::string> few(f.lines.begin(), f.lines.begin() + 4);
  std::string text;
  for (const auto& l : few) text += l + "\n";
  const std::string input = f.dir.write("few.txt", text);
  auto r = run("parla-translate", {"-m", f.checkpoint, "-i", input, "-b", "4", "-n", "3", "--threads", "1"});
  REQUIRE(r.exit_code == 0);
  auto j = post(s, {{"texts", few}, {"beam_size", 4}, {"n_best", 3}});
  // parla-translate's n-best lines: "i ||| text ||| score".
  std::map<size_t, std::vector<std::pair<std::string, double>>> expected;
  for (const auto& line : parla::testing::split_lines(r.out)) {
    const auto a = line.find(" ||| "), b = line.rfind(" ||| ");
    expected[std::stoul(line.substr(0, a))].push_back({line.substr(a + 5, b - a - 5), std::stod(line.substr(b + 5))});
  }
  for (size_t i = 0; i < few.size(); ++i) {
    if (few[i].empty()) continue;
    INFO("line " << i);
    REQUIRE(j["translations"][i].size() == expected[i].size());
    for (size_t k = 0; k < expected[i].size(); ++k) {
      CHECK(j["translations"][i][k]["text"] == expected[i][k].first);
      CHECK(j["translations"][i][k]["score"].get<double>() == Approx(expected[i][k].second).margin(1e-4));
    }
  }
  CHECK(s.stop(SIGINT) == 0);
}

TEST_CASE("the server's answers are parla-translate's with a shortlist, int8, beam and length penalty set by --set "
          "(issue 58: the shortlist was loaded and ignored)", "[serve_app][shortlist]") {
  auto& f = fixture();
  const auto [src_path, tgt_path] = parla::testing::write_toy_parallel(f.dir, "sl-train");
  const auto sl = f.dir.file("serve-shortlist.txt");
  auto built = run("parla-shortlist", {"-m", f.checkpoint, "--source", src_path, "--target", tgt_path, "-o", sl,
                                       "--best", "2", "--frequent", "1"});
  INFO(built.err);
  REQUIRE(built.exit_code == 0);
  std::vector<std::string> some;
  for (const auto& l : f.lines)
    if (!l.empty() && some.size() < 16) some.push_back(l);
  std::string text;
  for (const auto& l : some) text += l + "\n";
  const std::string input = f.dir.write("sl-input.txt", text);
  // The same decoding keys for both programs, each given as --set.
  const std::vector<std::string> keys{"--set", "decoding.beam_size=3", "--set", "decoding.precision=int8",
                                      "--set", "decoding.length_penalty=0.4"};
  auto translate = [&](bool shortlist) {
    std::vector<std::string> args{"-m", f.checkpoint, "-i", input, "--threads", "1"};
    args.insert(args.end(), keys.begin(), keys.end());
    if (shortlist) args.insert(args.end(), {"--set", "decoding.shortlist=" + sl});
    return run("parla-translate", args);
  };
  auto with = translate(true);
  auto without = translate(false);
  INFO(with.err);
  REQUIRE(with.exit_code == 0);
  REQUIRE(without.exit_code == 0);
  REQUIRE(with.err.find(", int8 on ") != std::string::npos);  // the keys took effect: the model decodes in int8
  REQUIRE(with.out != without.out);  // the shortlist changes some translation, or this test proves nothing
  const auto expected = parla::testing::split_lines(with.out);
  const bool continuous = GENERATE(false, true);
  INFO((continuous ? "continuous" : "static") << " batching");
  std::vector<std::string> args{"-m", f.checkpoint, "--set", "decoding.shortlist=" + sl};
  args.insert(args.end(), keys.begin(), keys.end());
  if (continuous) args.push_back("--continuous");
  Server s(args);
  auto j = post(s, {{"texts", some}});
  REQUIRE(j["translations"].size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("line " << i);
    CHECK(j["translations"][i] == expected[i]);
  }
  CHECK(s.stop(SIGINT) == 0);
}

TEST_CASE("every bad request gets its status and a JSON error, and the server stays up", "[serve_app]") {
  auto& f = fixture();
  Server s({"-m", f.checkpoint, "-b", "3", "--max-request-bytes", "2000", "--max-sentences", "5",
            "--max-beam-size", "4"});
  auto c = s.client();
  struct Case {
    std::string method, path, body;
    int status;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"POST", "/translate", "{not json", 400, "not valid JSON"},
      {"POST", "/translate", R"({"txt": "a"})", 400, "unknown field"},
      {"POST", "/translate", R"({"text": ["a"]})", 400, "must be a string"},
      {"POST", "/translate", "{\"text\": \"\xC3\x28\"}", 400, "UTF-8"},
      {"POST", "/translate", R"({"text": "a", "beam_size": 5})", 400, "serve.max_beam_size"},
      {"POST", "/translate", R"({"text": "a", "beam_size": 2, "n_best": 3})", 400, "n_best"},
      {"POST", "/translate", R"({"texts": ["a","b","c","d","e","f"]})", 413, "serve.max_sentences"},
      {"POST", "/translate", "{\"text\": \"" + std::string(3000, 'a') + "\"}", 413, "serve.max_request_bytes"},
      {"GET", "/translate", "", 405, "POST"},
      {"PUT", "/translate", "x", 405, "POST"},
      {"POST", "/health", "x", 405, "GET"},
      {"DELETE", "/metrics", "", 405, "GET"},
      {"GET", "/nowhere", "", 404, "/nowhere"},
      {"POST", "/translate/x", "{}", 404, "/translate/x"},
  };
  for (const auto& k : cases) {
    INFO(k.method << " " << k.path << " " << k.body.substr(0, 60));
    httplib::Result res = k.method == "POST"     ? c.Post(k.path.c_str(), k.body, "application/json")
                          : k.method == "PUT"    ? c.Put(k.path.c_str(), k.body, "application/json")
                          : k.method == "DELETE" ? c.Delete(k.path.c_str())
                                                 : c.Get(k.path.c_str());
    REQUIRE(res);
    CHECK(res->status == k.status);
    json j;
    REQUIRE_NOTHROW(j = json::parse(res->body));
    CHECK_THAT(j["error"].get<std::string>(), Catch::Contains(k.expect));
    if (k.status == 405) CHECK(res->has_header("Allow"));
  }
  // Raw garbage instead of HTTP.
  {
    httplib::Client raw("127.0.0.1", s.port);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(s.port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    const std::string junk = "\x16\x03\x01 garbage \r\n\r\n";
    CHECK(::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL) > 0);
    close(fd);
  }
  // Still serving.
  CHECK(post(s, {{"text", f.lines[0]}})["translation"] == f.reference[0]);
  auto h = c.Get("/health");
  REQUIRE(h);
  CHECK(h->status == 200);
  CHECK(s.stop() == 0);
}

TEST_CASE("a full queue answers 503 with Retry-After", "[serve_app]") {
  auto& f = fixture();
  Server s({"-m", f.checkpoint, "--max-queue", "3"});
  auto c = s.client();
  auto res = c.Post("/translate", json{{"texts", {"a", "b", "c", "d"}}}.dump(), "application/json");
  REQUIRE(res);
  CHECK(res->status == 503);
  CHECK(res->get_header_value("Retry-After") == "1");
  CHECK_THAT(json::parse(res->body)["error"].get<std::string>(), Catch::Contains("serve.max_queue"));
  CHECK(post(s, {{"texts", {"a", "b", "c"}}})["translations"].size() == 3);
  // A body over 8 KB sent as a form (curl -d's default type) is read as JSON all the same.
  const std::string text(12000, 'a');
  auto form = c.Post("/translate", json{{"text", text}}.dump(), "application/x-www-form-urlencoded");
  REQUIRE(form);
  CHECK(form->status == 200);
  CHECK(s.stop() == 0);
}

TEST_CASE("a client that leaves mid-request has its waiting sentences dropped", "[serve_app]") {
  auto& f = fixture();
  Server s({"-m", f.checkpoint, "--batch-size", "1", "--max-wait-ms", "0"});
  json texts = json::array();
  for (int k = 0; k < 6; ++k)
    for (const auto& l : f.lines) texts.push_back(l + " x");
  {
    httplib::Client c("127.0.0.1", s.port);
    c.set_read_timeout(0, 300000);  // gives up after 0.3 s: the connection closes with the request queued
    auto res = c.Post("/translate", json{{"texts", texts}}.dump(), "application/json");
    CHECK_FALSE(res);
  }
  const std::regex dropped("parla_dropped_sentences_total ([0-9]+)");
  int n = 0;
  for (int tries = 0; tries < 100 && n == 0; ++tries) {
    std::this_thread::sleep_for(50ms);
    auto m = s.client().Get("/metrics");
    REQUIRE(m);
    std::smatch k;
    REQUIRE(std::regex_search(m->body, k, dropped));
    n = std::stoi(k[1]);
  }
  CHECK(n > 0);
  CHECK(n < static_cast<int>(texts.size()));
  CHECK(s.stop() == 0);
}

TEST_CASE("SIGTERM with requests in flight: they are answered, then the server exits 0", "[serve_app]") {
  auto& f = fixture();
  Server s({"-m", f.checkpoint, "-b", "3", "--batch-size", "4", "--max-wait-ms", "0", "--connection-threads", "16"});
  json texts = json::array();
  for (const auto& l : f.lines) texts.push_back(l);
  std::atomic<int> ok{0}, answered{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c)
    clients.emplace_back([&] {
      auto client = s.client();
      auto res = client.Post("/translate", json{{"texts", texts}}.dump(), "application/json");
      if (res) ++answered;
      if (res && res->status == 200 && json::parse(res->body)["translations"] == json(f.reference)) ++ok;
    });
  std::this_thread::sleep_for(300ms);
  const int code = s.stop(SIGTERM);
  for (auto& t : clients) t.join();
  INFO("parla-serve's log:\n" << parla::testing::read_file(s.log));  // an exit of 134 was seen once: say where
  CHECK(code == 0);
  CHECK(answered == 4);
  CHECK(ok == 4);
  CHECK_THAT(parla::testing::read_file(s.log), Catch::Contains("stopping"));
}

TEST_CASE("the drain timeout answers what still waits with 503 and the server exits 0", "[serve_app]") {
  auto& f = fixture();
  Server s({"-m", f.checkpoint, "--batch-size", "1", "--max-wait-ms", "0", "--drain-timeout", "0.2"});
  json texts = json::array();
  for (int k = 0; k < 8; ++k)
    for (const auto& l : f.lines) texts.push_back(l + " y");
  int status = 0;
  std::thread client([&] {
    auto c = s.client();
    auto res = c.Post("/translate", json{{"texts", texts}}.dump(), "application/json");
    if (res) status = res->status;
  });
  std::this_thread::sleep_for(300ms);
  CHECK(s.stop(SIGTERM) == 0);
  client.join();
  CHECK(status == 503);
}

TEST_CASE("a port in use exits 1 naming the address, a bad config exits 2 naming the key", "[serve_app]") {
  auto& f = fixture();
  Server first({"-m", f.checkpoint});
  auto second = run("parla-serve", {"-m", f.checkpoint, "--port", std::to_string(first.port)});
  CHECK(second.exit_code == 1);
  CHECK_THAT(second.err, Catch::Contains("127.0.0.1:" + std::to_string(first.port)));
  CHECK_THAT(second.err, Catch::Contains("in use"));
  auto sampling = run("parla-serve", {"-m", f.checkpoint, "--port", "0", "--set", "decoding.sampling=true"});
  CHECK(sampling.exit_code == 2);
  CHECK_THAT(sampling.err, Catch::Contains("decoding.sampling"));
  auto beam = run("parla-serve", {"-m", f.checkpoint, "--port", "0", "-b", "12"});
  CHECK(beam.exit_code == 2);
  CHECK_THAT(beam.err, Catch::Contains("serve.max_beam_size"));
  auto missing = run("parla-serve", {"-m", f.dir.file("nope.pt"), "--port", "0"});
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.err, Catch::Contains("nope.pt"));
  CHECK(first.stop() == 0);
}

TEST_CASE("parla-serve cuts lines at 256 pieces unless the user sets decoding.max_input_length", "[serve_app]") {
  auto& f = fixture();
  auto dflt = run("parla-serve", {"-m", f.checkpoint, "--dump-config"});
  REQUIRE(dflt.exit_code == 0);
  CHECK(json::parse(dflt.out)["decoding"]["max_input_length"] == 256);
  auto given = run("parla-serve", {"-m", f.checkpoint, "--max-input-length", "40", "--dump-config"});
  REQUIRE(given.exit_code == 0);
  CHECK(json::parse(given.out)["decoding"]["max_input_length"] == 40);
  // A line far over the limit is translated (cut, with a warning), as parla-translate --max-input-length does.
  std::string line;
  for (int i = 0; i < 400; ++i) line += parla::testing::toy_words()[static_cast<size_t>(i % 12)] + " ";
  const std::string input = f.dir.write("long.txt", line + "\n");
  auto offline = run("parla-translate", {"-m", f.checkpoint, "-i", input, "--max-input-length", "30", "--threads", "1"});
  REQUIRE(offline.exit_code == 0);
  Server s({"-m", f.checkpoint, "--max-input-length", "30"});
  CHECK(post(s, {{"text", line}})["translation"].get<std::string>() + "\n" == offline.out);
  // A line of 500 KB is cut to 32 characters per piece before it is tokenized, as parla-translate cuts it.
  std::string huge;
  while (huge.size() < 500000) huge += line;
  const std::string huge_input = f.dir.write("huge.txt", huge + "\n");
  auto huge_offline =
      run("parla-translate", {"-m", f.checkpoint, "-i", huge_input, "--max-input-length", "30", "--threads", "1"});
  REQUIRE(huge_offline.exit_code == 0);
  CHECK_THAT(huge_offline.err, Catch::Contains("input line 1: " + std::to_string(huge.size()) +
                                               " bytes, longer than the limit of 960 characters"));
  CHECK(post(s, {{"text", huge}})["translation"].get<std::string>() + "\n" == huge_offline.out);
  CHECK(s.stop() == 0);
  CHECK_THAT(parla::testing::read_file(s.log), Catch::Contains("truncated"));
  CHECK_THAT(parla::testing::read_file(s.log),
             Catch::Contains("a request: " + std::to_string(huge.size()) +
                             " bytes, longer than the limit of 960 characters (decoding.max_input_chars)"));
}

TEST_CASE("with serve.api_key, /translate and /metrics need the bearer token (401 without), /health does not",
          "[serve_app]") {
  auto& f = fixture();
  Server s({"-m", f.checkpoint, "-b", "3", "--set", "serve.api_key=s3cret"});
  auto c = s.client();
  const std::string body = json{{"text", f.lines[0]}}.dump();
  for (const std::string token : {"", "Bearer wrong", "Bearer s3cre", "Bearer s3cret2", "s3cret"}) {
    INFO("Authorization: " << token);
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", token);
    auto res = c.Post("/translate", h, body, "application/json");
    REQUIRE(res);
    CHECK(res->status == 401);
    CHECK(res->get_header_value("WWW-Authenticate") == "Bearer");
    CHECK_THAT(json::parse(res->body)["error"].get<std::string>(), Catch::Contains("serve.api_key"));
    auto m = c.Get("/metrics", h);
    REQUIRE(m);
    CHECK(m->status == 401);
  }
  const httplib::Headers ok{{"Authorization", "Bearer s3cret"}};
  auto res = c.Post("/translate", ok, body, "application/json");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(json::parse(res->body)["translation"] == f.reference[0]);
  auto m = c.Get("/metrics", ok);
  REQUIRE(m);
  CHECK(m->status == 200);
  CHECK_THAT(m->body, Catch::Contains("parla_requests_total{code=\"401\"} 10"));
  auto h = c.Get("/health");
  REQUIRE(h);
  CHECK(h->status == 200);
  CHECK(s.stop() == 0);
}

TEST_CASE("HEAD gets GET's headers without a body, a compressed body is 415, a long header 431",
          "[serve_app]") {
  auto& f = fixture();
  Server s({"-m", f.checkpoint, "--max-header-bytes", "1024"});
  auto c = s.client();
  auto head = c.Head("/health");
  REQUIRE(head);
  CHECK(head->status == 200);
  CHECK(head->get_header_value("Content-Length") == "15");
  CHECK(head->body.empty());
  auto gz = c.Post("/translate", {{"Content-Encoding", "gzip"}}, std::string(100, 'x'), "application/json");
  REQUIRE(gz);
  CHECK(gz->status == 415);
  CHECK(gz->get_header_value("Accept-Encoding") == "identity");
  auto big = c.Get("/health", {{"X-Big", std::string(2000, 'a')}});
  REQUIRE(big);
  CHECK(big->status == 431);
  CHECK_THAT(json::parse(big->body)["error"].get<std::string>(), Catch::Contains("serve.max_header_bytes"));
  // Still serving, and each refusal is counted.
  CHECK(post(s, {{"text", f.lines[1]}})["translation"] == f.reference[1]);
  auto m = c.Get("/metrics");
  REQUIRE(m);
  CHECK_THAT(m->body, Catch::Contains("parla_requests_total{code=\"415\"} 1"));
  CHECK_THAT(m->body, Catch::Contains("parla_requests_total{code=\"431\"} 1"));
  CHECK(s.stop() == 0);
}

TEST_CASE("an imported MarianMT model (Marian's piece numbering, decoding from pad) is served with "
          "parla-translate's translations", "[serve_app]") {
  TempDir dir("serve-imported");
  const auto ckpt = dir.file("imported.pt");
  auto c = run("parla-convert", {"-q", "hf", parla::testing::write_marian_folder(dir, "marian"), "-o", ckpt});
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  const std::vector<std::string> lines = {"the dog runs", "a small green tree", "we see the house"};
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  auto r = run("parla-translate", {"-q", "-m", ckpt, "-b", "2", "--threads", "1"}, dir.write("in.txt", text));
  REQUIRE(r.exit_code == 0);
  Server s({"-m", ckpt});
  CHECK(post(s, {{"texts", lines}, {"beam_size", 2}})["translations"] == json(parla::testing::split_lines(r.out)));
  CHECK(s.stop() == 0);
}

TEST_CASE("an imported NLLB-200 model is served: requests name source_lang and target_lang, and concurrent requests "
          "for different languages each get parla-translate's translations", "[serve_app][python]") {
  TempDir dir("serve-nllb");
  const auto fixture = parla::testing::make_m2m_fixture(dir, "nllb", 12);
  if (!fixture) return;
  const auto& f = *fixture;
  std::vector<std::string> lines;
  for (const auto& t : f.reference["texts"]) lines.push_back(t["source"]);
  // The request's language fields, and parla-translate's flags for the same: the tokenizer's default pair,
  // another target, another source and target.
  struct Languages {
    json fields;
    std::vector<std::string> flags;
    std::vector<std::string> expected;
  };
  std::vector<Languages> cases = {{json::object(), {}, {}},
                                  {{{"target_lang", "fra_Latn"}}, {"--target-lang", "fra_Latn"}, {}},
                                  {{{"source_lang", "fra_Latn"}, {"target_lang", "spa_Latn"}},
                                   {"--source-lang", "fra_Latn", "--target-lang", "spa_Latn"}, {}}};
  const auto input = dir.write("in.txt", [&] {
    std::string text;
    for (const auto& l : lines) text += l + "\n";
    return text;
  }());
  for (auto& c : cases) {
    std::vector<std::string> args = {"-q", "-m", f.checkpoint, "-b", "2", "--threads", "1", "-i", input};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    auto r = run("parla-translate", args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    c.expected = parla::testing::split_lines(r.out);
    REQUIRE(c.expected.size() == lines.size());
  }
  CHECK(cases[0].expected != cases[1].expected);  // the languages change the translations
  CHECK(cases[1].expected != cases[2].expected);

  Server s({"-m", f.checkpoint, "--set", "decoding.beam_size=2", "--set", "serve.max_wait_ms=20"});
  std::vector<std::thread> clients;
  std::mutex m;
  std::vector<std::string> wrong;
  for (size_t k = 0; k < cases.size(); ++k)
    for (int half = 0; half < 2; ++half)
      clients.emplace_back([&, k, half] {
        auto c = s.client();
        for (size_t i = static_cast<size_t>(half); i < lines.size(); i += 2) {
          json body = cases[k].fields;
          body["text"] = lines[i];
          auto res = c.Post("/translate", body.dump(), "application/json");
          const std::string got = res && res->status == 200 ? json::parse(res->body)["translation"].get<std::string>()
                                                            : "<no answer>";
          if (got != cases[k].expected[i]) {
            std::lock_guard<std::mutex> lock(m);
            wrong.push_back("case " + std::to_string(k) + " line " + std::to_string(i) + ": " + got);
          }
        }
      });
  for (auto& t : clients) t.join();
  INFO((wrong.empty() ? std::string() : wrong.front()));
  CHECK(wrong.empty());
  // A code the model lacks is a 400 naming the field and listing valid codes.
  auto bad = post(s, {{"text", lines[0]}, {"target_lang", "xx_Latn"}}, 400);
  CHECK_THAT(bad["error"].get<std::string>(), Catch::Contains("target_lang") && Catch::Contains("deu_Latn"));
  CHECK(s.stop() == 0);
}

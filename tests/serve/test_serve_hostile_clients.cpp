// parla-serve against hostile clients (issue 36), the fast subset: bench/hostile_serve.py --quick replays each
// attack on loopback against a parla-serve with a tiny model, while a fresh client probes /health and
// /translate, and fails (exit 1, naming the check) when the server dies, a probe is not answered, two /health
// probes of one attack take over 100 ms or one over a second (a scheduling hiccup on 2 cores shared with other
// tests), an attack is not refused as it should be, the resident memory grows past its bound
// or stays up after the attack, or SIGTERM does not end the server in time. The full-scale run (10,000
// connections, 20 s per attack, the Multi30k model) is a benchmark: docs/BENCHMARKS.md.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "support/run.h"
#include "support/temp_dir.h"
#include "support/tiny_checkpoint.h"

using parla::testing::run;

namespace {

const std::string& tiny_model() {
  static parla::testing::TempDir dir{"serve-hostile"};
  static const std::string path = [] {
    const std::string p = dir.file("model.pt");
    parla::testing::write_tiny_checkpoint(p, 36);
    return p;
  }();
  return path;
}

// Runs the attacks (and any parla-serve flags after "--") and returns the script's report.
parla::testing::RunResult attack(const std::string& attacks, const std::vector<std::string>& script_args = {},
                                 const std::vector<std::string>& server_args = {}) {
  std::vector<std::string> args{"python3", std::string(PARLA_SOURCE_DIR) + "/bench/hostile_serve.py", "--quick",
                                "--bin", std::string(PARLA_BIN_DIR) + "/parla-serve", "-m", tiny_model(),
                                "--attacks", attacks, "--rss-mb", "256", "--drain", "2"};
  args.insert(args.end(), script_args.begin(), script_args.end());
  args.push_back("--");
  args.insert(args.end(), {"--threads", "1"});
  args.insert(args.end(), server_args.begin(), server_args.end());
  return run("/usr/bin/env", args);
}

}  // namespace

TEST_CASE("a request nested 100,000 levels deep is answered 400 and the server lives", "[serve_hostile]") {
  auto r = attack("deep-json");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("status 400"));
}

TEST_CASE("pipelined requests are answered in order, and a client that half-closes gets its answer",
          "[serve_hostile]") {
  auto r = attack("pipeline,half-close");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("10 GETs in one write: 10 answers"));
}

TEST_CASE("500 slow and 500 silent connections do not keep a fresh client from an answer within 100 ms",
          "[serve_hostile]") {
  auto r = attack("slowloris,idle");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
}

// 9,000 slow connections closed at once leave the event loop 9,000 closes to handle; a fresh client connecting
// right after must not queue behind them (it did, 83-137 ms, when accepting shared the event loop's epoll set;
// accepting on its own thread answers in 3-23 ms on the same machine). The fd limit may lower the count.
TEST_CASE("a fresh client right after thousands of connections close at once is answered within 100 ms",
          "[serve_hostile]") {
  auto r = attack("close-storm");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("closed at once; a fresh /health right after each"));
}

// A new connection evicts the one that has waited longest, so a fresh client keeps its place until
// serve.max_connections newer connections have arrived before its request. Against a cap of 100, the attacker's
// first burst (500 connections in ~40 ms) went through that many while a probe whose process was descheduled
// between connect() and send() had sent nothing, and evicted it (1 run in 10 on 2 shared cores). A cap of 400
// still overflows and churns, and gives a probe four times the time.
TEST_CASE("at serve.max_connections a new client is still answered: the oldest slow connection makes room",
          "[serve_hostile]") {
  auto r = attack("slowloris", {}, {"--max-connections", "400"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  // The attacker's connections were closed to make room, and it had to reopen them.
  CHECK_THAT(r.out, !Catch::Contains("; 0 closed by the server"));
}

TEST_CASE("header floods, a chunked body and a gzip bomb are refused at their limits, memory bounded",
          "[serve_hostile]") {
  auto r = attack("many-headers,long-header,chunked-bomb,gzip-bomb");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("status 431"));
  CHECK_THAT(r.out, Catch::Contains("status 413"));
  CHECK_THAT(r.out, Catch::Contains("status 415"));
}

TEST_CASE("long words, a client reading one byte a second and clients leaving mid-body hurt nobody else",
          "[serve_hostile]") {
  auto r = attack("long-word,slow-reader,mid-body-disconnect", {}, {"--write-timeout", "1"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("then the server closed it"));
}

TEST_CASE("SIGTERM with slow connections open exits 0 within the drain timeout plus a second", "[serve_hostile]") {
  auto r = attack("sigterm");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("exit 0 after"));
}

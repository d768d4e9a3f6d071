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

// Issue 59. Beast checks its header limit per read, so `a:\r\n` lines written in one go passed 8 KiB and were
// stored field by field (240 MB answered 200 with 3.8 GB); the server now counts bytes and fields across reads.
// The trickle sends a byte every 20 ms within every size limit: the header deadline must cut it anyway.
TEST_CASE("a header of empty fields written in one go gets 431, and a header that keeps trickling is cut at its "
          "deadline", "[serve_hostile]") {
  auto r = attack("header-fields,header-trickle", {"--header-timeout", "1"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("statuses ['431']"));
  CHECK_THAT(r.out, Catch::Contains("closed by the server after 1."));
}

// 40 clients each keep a request in flight (a 3 s serve.max_wait_ms holds it) against 20 connection places: a
// fresh /health and /metrics are answered from the probe reserve (they got 503 before), a fresh /translate 503.
// Then a second SIGTERM with requests in flight answers them and exits 0 (it killed the process, status 143).
TEST_CASE("with every connection holding a request in flight, /health is answered, and a second SIGTERM answers "
          "requests in flight and exits 0", "[serve_hostile]") {
  auto r = attack("busy-cap,second-sigterm", {"--busy-connections", "40", "--drain", "10"},
                  {"--max-connections", "20", "--max-wait-ms", "3000"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("'503'"));
  CHECK_THAT(r.out, Catch::Contains("exit 0"));
}

// Four addresses flood 5,000 connections a second against 150 places, so a waiting connection keeps its place
// for about 30 ms if the oldest is evicted (the old server's rule); at full Python speed (26,000/s) the flooder
// takes one of the two cores and probes miss 100 ms. They must push out their own connections, while a keep-alive
// client and clients that wait 0.5 s before their request (other addresses) lose nothing (the flood reset
// 15 of 30 such requests). One address opening 100 connections under a limit of 50 per address has 50 refused.
// Then 500 clients pipeline 200 requests each and never read: a fresh /health stays within 100 ms.
TEST_CASE("a connection flood from a few addresses costs other clients nothing, nor do clients that never read",
          "[serve_hostile]") {
  auto r = attack("address-flood,address-limit,pipeline-no-read",
                  {"--flood-addresses", "4", "--flood-rate", "5000", "--address-connections", "100"},
                  {"--max-connections", "150", "--max-connections-per-address", "50"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("keep-alive client lost 0 of"));
  CHECK_THAT(r.out, !Catch::Contains("evicted 0 "));
  CHECK_THAT(r.out, Catch::Contains("100 connections from one address: 50 held, 50 refused"));
}

// Ten requests of 64 lines that decode to the length cap at beam 10, then ordinary one-line requests at beams 1, 5
// and 10: each is answered 200 within 2 s (serve.preempt_ms lets it go between two steps of the long batch), the
// long ones end in 504 at their deadline (6 s here) or 503, /health says degraded meanwhile and 200 after.
TEST_CASE("ordinary requests are answered within 2 s while requests of long lines at beam 10 decode",
          "[serve_hostile]") {
  auto r = attack("starve", {}, {"--set", "serve.request_timeout_s=6"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("beam 1: 200 in"));
  CHECK_THAT(r.out, Catch::Contains("/health 503 under load, 200 after"));
}

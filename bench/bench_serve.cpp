// parla-serve under load: N concurrent clients on loopback, each sending one sentence at a time over a keep-alive
// connection (the project's own bounded load generator, httplib's client), against
//   - the same server with batching limited to one request (serve.batch_requests = 1, mode "single"),
//   - the same server with continuous batching (serve.continuous, mode "continuous"; "cross" is static batching),
//   - offline translation of the same sentences in this process (Translator, batches of 64, model loaded), and
//   - the decoding time of one sentence alone (model loaded): the floor of a lone client's latency.
// Prints throughput (sentences/s), p50 / p99 request latency and how many answers differ from the offline
// translations of the same sentences (byte equality; must be 0), for each N and mode.
//   bench_serve [--seconds S] [--bin PATH] [model=../shared/models/multi30k-en-de-small/average.pt]
//               [sentences=../shared/data/multi30k/test_2016_flickr.en] [count=512] [clients=1,16,64]
//               [modes=cross,single,continuous] [extra serve flags...]
// Each run starts parla-serve (build/bin, or --bin: another build, e.g. an older one to compare) with --port 0,
// waits for "ready", runs, and stops it with SIGTERM. --seconds S: each client sends requests for S seconds
// (cycling through the sentences) instead of the clients sharing `count` sentences; a request not answered
// within 60 s is a failure (a client the server starves).
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/config.h"
#include "runtime/runtime.h"
#include "core/lean_load.h"
#include "decode/translate_file.h"
#include "decode/translation_model.h"
#include "decode/translator.h"

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

namespace {

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, sep)) out.push_back(item);
  return out;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

struct ServeProcess {
  pid_t pid = -1;
  int port = 0;
  std::string log = "/tmp/bench_serve_" + std::to_string(getpid()) + ".err";

  ServeProcess(const std::string& bin, std::vector<std::string> args) {
    args.insert(args.begin(), bin);
    pid = fork();
    if (pid == 0) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    for (int i = 0; i < 3000; ++i) {
      std::string text = slurp(log);
      if (text.find("ready:") != std::string::npos) {
        std::smatch m;
        if (std::regex_search(text, m, std::regex("listening on http://[0-9.]+:([0-9]+)"))) port = std::stoi(m[1]);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::fprintf(stderr, "parla-serve did not start:\n%s\n", slurp(log).c_str());
    std::exit(1);
  }
  ~ServeProcess() {
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
    std::remove(log.c_str());
  }
};

struct LoadResult {
  size_t requests = 0, differ = 0, failures = 0;
  double seconds = 0;
  std::vector<double> latency;  // per request, seconds
};

// `clients` threads, each with its own keep-alive connection, send one sentence at a time and wait for its
// answer: until the `count` sentences are done (seconds = 0), or for `seconds`. Answers are compared with
// `expected` (the offline translation of the same sentence).
LoadResult load(int port, const std::vector<std::string>& sentences, const std::vector<std::string>& expected,
                size_t count, int clients, double seconds) {
  LoadResult r;
  std::atomic<size_t> next{0}, differ{0}, failures{0};
  std::vector<std::vector<double>> lat(static_cast<size_t>(clients));
  // Connections are opened (one after the other) before the clock starts.
  std::vector<std::unique_ptr<httplib::Client>> conns;
  for (int c = 0; c < clients; ++c) {
    conns.push_back(std::make_unique<httplib::Client>("127.0.0.1", port));
    conns.back()->set_keep_alive(true);
    conns.back()->set_read_timeout(seconds > 0 ? 60 : 300, 0);
    conns.back()->set_tcp_nodelay(true);
    if (seconds == 0) {
      auto h = conns.back()->Get("/health");
      if (!h || h->status != 200) ++failures;
    }
  }
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      for (size_t k = next++; seconds > 0 ? Clock::now() < end : k < count; k = next++) {
        const size_t i = k % sentences.size();
        const auto t0 = Clock::now();
        auto res = conns[static_cast<size_t>(c)]->Post("/translate", json{{"text", sentences[i]}}.dump(),
                                                       "application/json");
        if (!res || res->status != 200) {
          ++failures;
        } else {
          differ += json::parse(res->body)["translation"].get<std::string>() + "\n" != expected[i];
        }
        lat[static_cast<size_t>(c)].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
    });
  }
  for (auto& t : threads) t.join();
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& l : lat) r.latency.insert(r.latency.end(), l.begin(), l.end());
  r.requests = r.latency.size();
  r.failures = failures;
  r.differ = differ;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  // The executables' allocator and OpenMP settings (runtime.h), so that the in-process peers run as
  // parla-translate does.
  parla::runtime::tune_process(argc, argv);
  double seconds = 0;
  std::string bin = std::string(PARLA_BENCH_BIN_DIR) + "/parla-serve";
  while (argc > 2) {
    const std::string option = argv[1];
    if (option == "--seconds") {
      seconds = std::stod(argv[2]);
    } else if (option == "--bin") {
      bin = argv[2];
    } else {
      break;
    }
    argv += 2;
    argc -= 2;
  }
  // 1,000 clients need 1,000 sockets here, and as many in the server.
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  const std::string root = std::string(PARLA_BENCH_SOURCE_DIR) + "/../shared";
  std::string model = argc > 1 ? argv[1] : root + "/models/multi30k-en-de-small/average.pt";
  std::string input = argc > 2 ? argv[2] : root + "/data/multi30k/test_2016_flickr.en";
  size_t count = argc > 3 ? std::stoul(argv[3]) : 512;
  std::vector<int> client_counts;
  for (const auto& c : split(argc > 4 ? argv[4] : "1,16,64", ',')) client_counts.push_back(std::stoi(c));
  auto modes = split(argc > 5 ? argv[5] : "cross,single,continuous", ',');
  std::vector<std::string> extra;
  for (int i = 6; i < argc; ++i) extra.push_back(argv[i]);

  auto sentences = split(slurp(input), '\n');
  if (sentences.empty()) {
    std::fprintf(stderr, "no sentences in %s\n", input.c_str());
    return 1;
  }
  while (sentences.size() < count) sentences.insert(sentences.end(), sentences.begin(), sentences.end());
  sentences.resize(count);
  std::printf("bench_serve: %s, %s, %zu sentences of %s, beam 5, threads %u\n", bin.c_str(), model.c_str(), count,
              input.c_str(), std::thread::hardware_concurrency());
  if (seconds > 0) std::printf("each client sends requests for %.0f s\n", seconds);

  // The peers, in this process with the model loaded: offline batches of 64, and one sentence at a time.
  std::vector<std::string> offline_out;
  {
    parla::runtime::apply(parla::RuntimeConfig{});
    parla::DecodingConfig d;
    d.batch_size = 64;
    parla::decode::Translator loaded(
        parla::load_lean([&] { return parla::decode::TranslationModel::load({model}, d); }), 1);
    parla::decode::FileTranslator translator(loaded, d);
    translator.translate_lines({sentences[0]});  // warm-up
    auto t0 = Clock::now();
    offline_out = translator.translate_lines(sentences);
    const double offline = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<double> alone;
    const size_t n_alone = std::min<size_t>(count, 200);
    for (size_t i = 0; i < n_alone; ++i) {
      auto t = Clock::now();
      translator.translate_lines({sentences[i]});
      alone.push_back(std::chrono::duration<double>(Clock::now() - t).count());
    }
    std::printf("offline parla-translate path, batch 64: %.1f sentences/s\n", static_cast<double>(count) / offline);
    std::printf("one sentence alone (%zu sentences): p50 %.1f ms, p99 %.1f ms, mean %.1f ms\n", n_alone,
                1e3 * percentile(alone, 0.5), 1e3 * percentile(alone, 0.99),
                1e3 * std::accumulate(alone.begin(), alone.end(), 0.0) / static_cast<double>(n_alone));
  }

  std::printf("%-8s %8s %9s %14s %10s %10s %9s %10s\n", "mode", "clients", "requests", "sentences/s", "p50 ms",
              "p99 ms", "failures", "differ");
  for (const auto& mode : modes) {
    for (int clients : client_counts) {
      std::vector<std::string> args = {"-m", model, "--port", "0"};
      if (mode == "single") args.insert(args.end(), {"--batch-requests", "1"});
      if (mode == "continuous") args.push_back("--continuous");
      args.insert(args.end(), extra.begin(), extra.end());
      ServeProcess server(bin, args);
      const size_t n = clients == 1 ? std::min<size_t>(count, 200) : count;
      std::vector<std::string> part(sentences.begin(), sentences.begin() + static_cast<long>(n));
      load(server.port, part, offline_out, std::min<size_t>(n, 16), clients, 0);  // warm-up
      auto r = load(server.port, part, offline_out, n, clients, seconds);
      std::printf("%-8s %8d %9zu %14.1f %10.1f %10.1f %9zu %10zu\n", mode.c_str(), clients, r.requests,
                  static_cast<double>(r.requests - r.failures) / r.seconds, 1e3 * percentile(r.latency, 0.5),
                  1e3 * percentile(r.latency, 0.99), r.failures, r.differ);
      std::fflush(stdout);
    }
  }
  return 0;
}

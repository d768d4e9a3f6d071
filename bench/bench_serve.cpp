// parla-serve under load: N concurrent clients on loopback, each sending one sentence at a time over a keep-alive
// connection (the project's own bounded load generator, httplib's client), against
//   - the same server with batching limited to one request (serve.batch_requests = 1, mode "single"),
//   - the same server with continuous batching (serve.continuous, mode "continuous"; "cross" is static batching),
//   - offline translation of the same sentences in this process (Translator, batches of 64, model loaded), and
//   - the decoding time of one sentence alone (model loaded): the floor of a lone client's latency.
// Prints throughput (sentences/s), p50 / p99 request latency and how many answers differ from the offline
// translations of the same sentences (byte equality; must be 0), for each N and mode.
//   bench_serve [model=../shared/models/multi30k-en-de-small/average.pt]
//               [sentences=../shared/data/multi30k/test_2016_flickr.en] [count=512] [clients=1,16,64]
//               [modes=cross,single,continuous] [extra serve flags...]
// Each run starts parla-serve (build/bin) with --port 0, waits for "ready", runs, and stops it with SIGTERM.
#include <fcntl.h>
#include <signal.h>
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
#include "core/runtime.h"
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
  std::vector<std::string> answers;  // per sentence
  double seconds = 0;
  std::vector<double> latency;  // per request, seconds
  size_t failures = 0;
};

// `clients` threads share the sentences; each sends one at a time and waits for its answer.
LoadResult load(int port, const std::vector<std::string>& sentences, int clients) {
  LoadResult r;
  r.answers.resize(sentences.size());
  std::atomic<size_t> next{0};
  std::vector<std::vector<double>> lat(static_cast<size_t>(clients));
  std::atomic<size_t> failures{0};
  // Connections are opened (one after the other) before the clock starts.
  std::vector<std::unique_ptr<httplib::Client>> conns;
  for (int c = 0; c < clients; ++c) {
    conns.push_back(std::make_unique<httplib::Client>("127.0.0.1", port));
    conns.back()->set_keep_alive(true);
    conns.back()->set_read_timeout(300, 0);
    conns.back()->set_tcp_nodelay(true);
    auto h = conns.back()->Get("/health");
    if (!h || h->status != 200) ++failures;
  }
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      for (size_t i = next++; i < sentences.size(); i = next++) {
        const auto t0 = Clock::now();
        auto res = conns[static_cast<size_t>(c)]->Post("/translate", json{{"text", sentences[i]}}.dump(),
                                                       "application/json");
        if (!res || res->status != 200) {
          ++failures;
        } else {
          r.answers[i] = json::parse(res->body)["translation"].get<std::string>() + "\n";
        }
        lat[static_cast<size_t>(c)].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
    });
  }
  for (auto& t : threads) t.join();
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& l : lat) r.latency.insert(r.latency.end(), l.begin(), l.end());
  r.failures = failures;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  // The executables' allocator and OpenMP settings (runtime.h), so that the in-process peers run as
  // parla-translate does.
  parla::runtime::tune_process(argc, argv);
  const std::string root = std::string(PARLA_BENCH_SOURCE_DIR) + "/../shared";
  std::string model = argc > 1 ? argv[1] : root + "/models/multi30k-en-de-small/average.pt";
  std::string input = argc > 2 ? argv[2] : root + "/data/multi30k/test_2016_flickr.en";
  size_t count = argc > 3 ? std::stoul(argv[3]) : 512;
  std::vector<int> client_counts;
  for (const auto& c : split(argc > 4 ? argv[4] : "1,16,64", ',')) client_counts.push_back(std::stoi(c));
  auto modes = split(argc > 5 ? argv[5] : "cross,single,continuous", ',');
  std::vector<std::string> extra;
  for (int i = 6; i < argc; ++i) extra.push_back(argv[i]);
  const std::string bin = std::string(PARLA_BENCH_BIN_DIR) + "/parla-serve";

  auto sentences = split(slurp(input), '\n');
  if (sentences.empty()) {
    std::fprintf(stderr, "no sentences in %s\n", input.c_str());
    return 1;
  }
  while (sentences.size() < count) sentences.insert(sentences.end(), sentences.begin(), sentences.end());
  sentences.resize(count);
  std::printf("bench_serve: %s, %zu sentences of %s, beam 5, threads %u\n", model.c_str(), count, input.c_str(),
              std::thread::hardware_concurrency());

  // The peers, in this process with the model loaded: offline batches of 64, and one sentence at a time.
  std::vector<std::string> offline_out;
  {
    parla::runtime::apply(parla::RuntimeConfig{});
    parla::DecodingConfig d;
    d.batch_size = 64;
    auto translator = parla::decode::Translator::load({model}, d, 1);
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

  std::printf("%-8s %8s %14s %10s %10s %9s %10s\n", "mode", "clients", "sentences/s", "p50 ms", "p99 ms", "failures",
              "differ");
  for (const auto& mode : modes) {
    for (int clients : client_counts) {
      std::vector<std::string> args = {"-m", model, "--port", "0", "--connection-threads", "128"};
      if (mode == "single") args.insert(args.end(), {"--batch-requests", "1"});
      if (mode == "continuous") args.push_back("--continuous");
      args.insert(args.end(), extra.begin(), extra.end());
      ServeProcess server(bin, args);
      const size_t n = clients == 1 ? std::min<size_t>(count, 200) : count;
      std::vector<std::string> part(sentences.begin(), sentences.begin() + static_cast<long>(n));
      load(server.port, std::vector<std::string>(part.begin(), part.begin() + std::min<size_t>(n, 16)), clients);
      auto r = load(server.port, part, clients);
      // Answers against the offline translations of the same sentences (byte equality).
      size_t differ = 0;
      for (size_t i = 0; i < n; ++i) differ += r.answers[i] != offline_out[i];
      std::printf("%-8s %8d %14.1f %10.1f %10.1f %9zu %10zu\n", mode.c_str(), clients,
                  static_cast<double>(n) / r.seconds, 1e3 * percentile(r.latency, 0.5),
                  1e3 * percentile(r.latency, 0.99), r.failures, differ);
      std::fflush(stdout);
    }
  }
  return 0;
}

// Loading a checkpoint in the same process, format against format: the TorchScript archive of earlier parla
// versions (format 1, through the strict reader: zip, pickle, storages copied out) and its safetensors copy
// (format 2, mapped: the header is parsed in place and each weight is copied once, from the page cache into the
// model). Rounds alternate between the files so that machine load hits both alike; each line is one full
// load_seq2seq (model built from the stored config, weights checked and copied), min/median/max over the rounds,
// and the growth of the process's resident memory across all rounds (a leak would show there).
//   bench_checkpoint_load FILE... [--rounds N]     (make a format-2 copy with `parla-train upgrade -o NEW OLD`)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/runtime.h"
#include "models/checkpoint.h"
#include "models/tensor_archive.h"

namespace {

// Resident memory now, in MiB (/proc/self/statm: pages).
double rss_mib() {
  std::ifstream in("/proc/self/statm");
  long size = 0, resident = 0;
  in >> size >> resident;
  return static_cast<double>(resident) * 4096.0 / (1 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  int rounds = 7;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) rounds = std::stoi(argv[++i]);
    else files.push_back(a);
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: bench_checkpoint_load FILE... [--rounds N]\n");
    return 2;
  }
  parla::RuntimeConfig rt;
  rt.threads = 1;
  parla::runtime::apply(rt);
  std::vector<std::vector<double>> ms(files.size());
  const double rss_start = rss_mib();
  for (int r = 0; r < rounds; ++r) {
    for (size_t f = 0; f < files.size(); ++f) {
      const auto t0 = std::chrono::steady_clock::now();
      auto loaded = parla::models::load_seq2seq(files[f]);
      ms[f].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  std::printf("%-60s %7s %9s %9s %9s\n", "checkpoint (load_seq2seq, 1 thread)", "format", "min ms", "median ms",
              "max ms");
  for (size_t f = 0; f < files.size(); ++f) {
    auto v = ms[f];
    std::sort(v.begin(), v.end());
    const bool legacy = parla::models::TensorArchive::load(files[f]).legacy();
    std::printf("%-60s %7s %9.1f %9.1f %9.1f\n", files[f].c_str(), legacy ? "1 (zip)" : "2 (st)", v.front(),
                v[v.size() / 2], v.back());
  }
  std::printf("resident memory: %.0f MiB before the first load, %.0f MiB after %d rounds\n", rss_start, rss_mib(),
              rounds);
  return 0;
}

// How the cost of one self-attention layer grows with the input's length, for every variant of
// model.attention (seed 000's complexity table, seed 001's O(n^2) slide, seed 002's efficient attention).
//
// One nn::SelfAttention layer (d_model 512, 8 heads, encoder form: not causal), batch 1, input x [1, T, 512]:
// forward (no autograd) and forward + backward (autograd through x and the weights) at each length T. Each
// (variant, T) runs in its own child process, so its peak resident memory (wait4's ru_maxrss) is its own; the
// same child at T = 1 gives the baseline (libraries, weights) that the "extra MiB" column subtracts.
// Times are the median of `reps` runs after a warm-up (one run at the largest lengths). Where the full
// layer's predicted memory (about 5 float [H, T, T] tensors) exceeds the limit it is skipped, not swapped.
// The fitted growth exponent is the least-squares slope of log(time) against log(T) over the lengths given by
// `fit` (full: those of them that ran).
//
// Usage: bench_attention_scaling [lengths=256,1024,4096,16384] [variants=full,local,sparse,linear,performer,
//        routing,nystrom] [fit=1024-16384] [memory_limit_gib=20] [reps=3]
// Variant settings: local window 16; sparse = band 16 + 1 global token + 1 random block, blocks of 32 (BigBird);
// performer 64 features; routing with round(sqrt(T)) clusters (Roy et al. 2021); nystrom 64 landmarks, 6
// pseudo-inverse iterations, convolution kernel 33.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "median_time.h"
#include "nn/self_attention_factory.h"
#include "runtime/runtime.h"

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

parla::nn::SelfAttention layer_for(const std::string& variant, int64_t t) {
  parla::nn::MultiHeadAttentionOptions o;
  o.d_model = 512;
  o.heads = 8;
  parla::ModelConfig c;
  c.local_window = 16;
  c.sparse_pattern = {parla::AtomicSparsePattern::kBand, parla::AtomicSparsePattern::kGlobal,
                      parla::AtomicSparsePattern::kRandom};
  c.sparse_block_size = 32;
  c.performer_features = 64;
  c.routing_clusters = static_cast<int>(std::max<int64_t>(1, std::llround(std::sqrt(static_cast<double>(t)))));
  c.nystrom_landmarks = 64;
  parla::AttentionKind kind{};
  if (!parla::config::parse_choice(variant, kind) || kind == parla::AttentionKind::kInherit)
    throw std::invalid_argument("unknown attention variant '" + variant + "'");
  return parla::nn::make_self_attention(kind, o, c);
}


struct Measured {
  double forward_s = -1, backward_s = -1, peak_mib = -1;
};

// Runs in the child: times forward and forward + backward at length t.
void measure_in_child(const std::string& variant, int64_t t, int reps, int fd) {
  torch::manual_seed(1);
  auto attn = layer_for(variant, t);
  attn->eval();  // no dropout; routing's and performer's training-time updates are not the layer's cost
  auto x = torch::randn({1, t, 512});
  const int r = t >= 16384 ? 1 : reps;
  double fwd = 0, bwd = 0;
  if (t > 1) {
    {
      torch::NoGradGuard no_grad;
      fwd = parla::bench::median_seconds(r, [&] { attn->self_attend(x, {}, false); });
    }
    auto xg = x.clone().requires_grad_(true);
    bwd = parla::bench::median_seconds(r, [&] {
      auto y = attn->self_attend(xg, {}, false);
      y.sum().backward();
    });
  }
  double out[2] = {fwd, bwd};
  if (write(fd, out, sizeof out) != sizeof out) _exit(3);
}

Measured run_child(const std::string& variant, int64_t t, int reps) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    try {
      measure_in_child(variant, t, reps, fds[1]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s at T=%lld: %s\n", variant.c_str(), (long long)t, e.what());
      _exit(2);
    }
    _exit(0);
  }
  close(fds[1]);
  double in[2] = {-1, -1};
  const bool got = read(fds[0], in, sizeof in) == sizeof in;
  close(fds[0]);
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  Measured m;
  if (got && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    m.forward_s = in[0];
    m.backward_s = in[1];
    m.peak_mib = usage.ru_maxrss / 1024.0;
  }
  return m;
}

// Least-squares slope of log(y) on log(x).
double fitted_exponent(const std::vector<std::pair<double, double>>& points) {
  if (points.size() < 2) return NAN;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (auto [x, y] : points) {
    sx += std::log(x);
    sy += std::log(y);
    sxx += std::log(x) * std::log(x);
    sxy += std::log(x) * std::log(y);
  }
  const double n = static_cast<double>(points.size());
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

}  // namespace

int main(int argc, char** argv) {
  parla::runtime::tune_process(argc, argv);
  const int threads = parla::runtime::apply(parla::RuntimeConfig{});
  std::vector<int64_t> lengths;
  for (const auto& s : split(argc > 1 ? argv[1] : "256,1024,4096,16384")) lengths.push_back(std::stoll(s));
  const auto variants = split(argc > 2 ? argv[2] : "full,local,sparse,linear,performer,routing,nystrom");
  const std::string fit = argc > 3 ? argv[3] : "1024-16384";
  const double limit_gib = argc > 4 ? std::stod(argv[4]) : 20.0;
  const int reps = argc > 5 ? std::stoi(argv[5]) : 3;
  const int64_t fit_lo = std::stoll(fit.substr(0, fit.find('-'))), fit_hi = std::stoll(fit.substr(fit.find('-') + 1));

  std::printf("one self-attention layer, d_model 512, 8 heads, batch 1, not causal; %d threads, %s\n", threads,
              parla::runtime::blas_name().c_str());
  std::printf("| variant | T | forward ms | forward+backward ms | peak RSS MiB | extra MiB |\n|---|---|---|---|---|---|\n");
  std::map<std::string, std::pair<std::vector<std::pair<double, double>>, std::vector<std::pair<double, double>>>> fits;
  for (const auto& variant : variants) {
    const Measured base = run_child(variant, 1, 1);
    for (int64_t t : lengths) {
      const double full_gib = 5.0 * 8 * static_cast<double>(t) * t * 4 / (1 << 30);
      if (variant == "full" && full_gib > limit_gib) {
        std::printf("| %s | %lld | skipped: ~%.0f GiB > %.0f GiB | | | |\n", variant.c_str(), (long long)t, full_gib,
                    limit_gib);
        std::fflush(stdout);
        continue;
      }
      const Measured m = run_child(variant, t, reps);
      if (m.forward_s < 0) {
        std::printf("| %s | %lld | failed | | | |\n", variant.c_str(), (long long)t);
        continue;
      }
      std::printf("| %s | %lld | %.1f | %.1f | %.0f | %.0f |\n", variant.c_str(), (long long)t, m.forward_s * 1e3,
                  m.backward_s * 1e3, m.peak_mib, m.peak_mib - base.peak_mib);
      std::fflush(stdout);
      if (t >= fit_lo && t <= fit_hi) {
        fits[variant].first.emplace_back(static_cast<double>(t), m.forward_s);
        fits[variant].second.emplace_back(static_cast<double>(t), m.backward_s);
      }
    }
  }
  std::printf("\nfitted growth exponent of time over T in [%lld, %lld] (lengths that ran):\n\n", (long long)fit_lo,
              (long long)fit_hi);
  std::printf("| variant | forward | forward+backward |\n|---|---|---|\n");
  for (const auto& variant : variants)
    std::printf("| %s | %.2f | %.2f |\n", variant.c_str(), fitted_exponent(fits[variant].first),
                fitted_exponent(fits[variant].second));
  return 0;
}

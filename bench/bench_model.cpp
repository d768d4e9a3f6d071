// Forward+backward throughput of the Transformer presets on 4,096-token batches, against the GEMM ceiling.
//
// Batch: 128 sentences x 32 source tokens and 128 x 32 target tokens (4,096 tokens per side), vocabulary 8,000
// per side (untied output projection shared-size), dropout as in the preset, training mode, loss = mean token
// cross-entropy. Reports the median of the timed iterations after one warm-up iteration.
//
// FLOP formula (multiply-add = 2 FLOPs; matmuls only; embeddings, norms, softmax and element-wise ops are
// excluded, so this is a lower bound of the work done). With d = d_model, f = ffn_dim, S/T source/target
// length, Ns/Nt source/target tokens in the batch, L_e/L_d layers, V target vocabulary:
//   encoder  Ns * L_e * [2(4d^2 + 2df) + 4Sd]            (Q,K,V,O projections, FFN, QK^T and AV)
//   decoder  Nt * L_d * [2(4d^2 + 2d^2 + 2df) + 4Td + 4Sd] + Ns * L_d * 2(2d^2)
//            (self-attention Q,K,V,O; cross-attention Q,O; FFN; self and cross QK^T, AV; cross K,V of memory)
//   output   Nt * 2dV
//   training = 3 x forward (the backward pass costs two matmuls per forward matmul).
// Usage: bench_model [iterations=3] [presets=tiny,base]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/config.h"
#include "runtime/runtime.h"
#include "models/factory.h"

namespace {

double forward_flops(const parla::ModelConfig& c, double ns, double nt, double s, double t, double v) {
  const double d = c.d_model, f = c.ffn_dim;
  double enc = ns * c.encoder_layers * (2 * (4 * d * d + 2 * d * f) + 4 * s * d);
  double dec = nt * c.decoder_layers * (2 * (6 * d * d + 2 * d * f) + 4 * t * d + 4 * s * d) +
               ns * c.decoder_layers * 2 * (2 * d * d);
  double out = nt * 2 * d * v;
  return enc + dec + out;
}

// GEMM ceiling measured now, in this process: median GFLOP/s of a 4096x512x2048 fp32 matmul (a training-shaped
// FFN GEMM), so that the model's figure can be compared under the same machine load.
double measured_gemm_gflops() {
  torch::NoGradGuard g;
  auto a = torch::randn({4096, 512}), b = torch::randn({512, 2048});
  std::vector<double> rates;
  for (int i = 0; i < 6; ++i) {
    auto start = std::chrono::steady_clock::now();
    auto c = torch::matmul(a, b);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (i > 0) rates.push_back(2.0 * 4096 * 512 * 2048 / s / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  parla::runtime::tune_process(argc, argv);
  int threads = parla::runtime::apply(parla::RuntimeConfig{});
  int iterations = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  std::vector<std::string> presets{"tiny", "base"};
  if (argc > 2) {
    presets.clear();
    std::stringstream ss(argv[2]);
    for (std::string p; std::getline(ss, p, ',');) presets.push_back(p);
  }
  const int64_t batch = 128, len = 32, vocab = 8000;
  std::printf("bench_model: forward+backward, %lld x %lld tokens per side, vocab %lld, %d threads, BLAS %s\n",
              (long long)batch, (long long)len, (long long)vocab, threads, parla::runtime::blas_name().c_str());
  std::printf("FLOPs = 3 x forward matmul FLOPs (formula in bench/bench_model.cpp); GEMM ceiling ~210 GFLOP/s\n");
  const double gemm = measured_gemm_gflops();
  std::printf("measured GEMM 4096x512x2048 now: %.1f GFLOP/s\n", gemm);
  for (const auto& preset : presets) {
    parla::config::ConfigBuilder b;
    b.set("model.preset", preset, "bench");
    auto cfg = b.build().model;
    torch::manual_seed(1);
    auto model = parla::models::build_seq2seq(cfg, vocab, vocab);
    model->train();
    auto src = torch::randint(4, vocab, {batch, len}, torch::kLong);
    auto tgt = torch::randint(4, vocab, {batch, len + 1}, torch::kLong);
    tgt.select(1, 0).fill_(parla::kBosId);
    auto tgt_in = tgt.narrow(1, 0, len), tgt_out = tgt.narrow(1, 1, len);
    std::vector<double> seconds;
    for (int it = 0; it <= iterations; ++it) {
      auto start = std::chrono::steady_clock::now();
      model->zero_grad();
      auto logits = model->forward(src, tgt_in);
      auto loss = torch::cross_entropy_loss(logits.reshape({-1, vocab}), tgt_out.reshape({-1}));
      loss.backward();
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (it > 0) seconds.push_back(s);  // the first is warm-up
    }
    std::sort(seconds.begin(), seconds.end());
    double median = seconds[seconds.size() / 2];
    double flops = 3 * forward_flops(cfg, batch * len, batch * len, len, len, vocab);
    int64_t params = 0;
    for (const auto& p : model->parameters()) params += p.numel();
    std::printf("%-5s d=%d ffn=%d heads=%d layers=%d+%d params=%.1fM: median %.3f s/batch (%d iters), "
                "%.0f target tok/s, %.0f src+tgt tok/s, %.1f GFLOP per batch, %.1f GFLOP/s (%.0f%% of 210, %.0f%% of the GEMM measured now)\n",
                preset.c_str(), cfg.d_model, cfg.ffn_dim, cfg.heads, cfg.encoder_layers, cfg.decoder_layers,
                params / 1e6, median, iterations, batch * len / median, 2 * batch * len / median, flops / 1e9,
                flops / 1e9 / median, 100 * flops / 1e9 / median / 210, 100 * flops / 1e9 / median / gemm);
    std::fflush(stdout);
  }
  return 0;
}

// Training throughput of the whole parla-train loop (batching from the memory-mapped dataset, label-smoothed
// loss, gradient norm, AdamW, schedule, logging) against the bare forward+backward of the same model on the same
// batch shape (what bench_model measures), for the tiny and base presets.
//
// Data: a synthetic dataset of 31-token sentences (+ </s> = 32 per side), vocabulary 8,000, so a batch of
// training.batch_tokens = 8192 padded source+target tokens holds 128 pairs = 4,096 tokens per side, the shape of
// bench_model. FLOPs: bench_model's formula (3 x forward matmul FLOPs). Throughput is src+tgt tokens/s from the
// trainer's metrics.jsonl (median over steps after the first).
// Usage: bench_train [steps=6] [presets=tiny,base] [device=cpu] [precisions=fp32]
//   e.g. bench_train 20 base cuda fp32,bf16 (a GPU's figures; the bare pass then synchronises the device per step)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/config.h"
#include "runtime/runtime.h"
#include "runtime/runtime_device.h"
#include "data/token_dataset_writer.h"
#include "models/factory.h"
#include "train/label_smoothed_cross_entropy.h"
#include "train/trainer.h"

namespace {

const int64_t kVocab = 8000, kLen = 31, kBatch = 128;

double forward_flops(const parla::ModelConfig& c, double ns, double nt, double s, double t, double v) {
  const double d = c.d_model, f = c.ffn_dim;
  double enc = ns * c.encoder_layers * (2 * (4 * d * d + 2 * d * f) + 4 * s * d);
  double dec = nt * c.decoder_layers * (2 * (6 * d * d + 2 * d * f) + 4 * t * d + 4 * s * d) +
               ns * c.decoder_layers * 2 * (2 * d * d);
  return enc + dec + nt * 2 * d * v;
}

std::string make_dataset(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> tok(4, kVocab - 1);
  for (auto [split, n] : {std::pair<const char*, int>{"train", 4096}, {"valid", 16}}) {
    parla::data::TokenDatasetWriter s(dir + "/" + split + ".de", 2), t(dir + "/" + split + ".en", 2);
    for (int i = 0; i < n; ++i) {
      std::vector<int> a(kLen), b(kLen);
      for (auto& x : a) x = tok(rng);
      for (auto& x : b) x = tok(rng);
      s.add(a);
      t.add(b);
    }
    s.finish();
    t.finish();
  }
  std::ofstream(dir + "/spm.model") << "placeholder";
  nlohmann::json meta = {{"format", "parla-dataset"}, {"format_version", 1}, {"src_lang", "de"}, {"tgt_lang", "en"},
                         {"vocab", {{"joint", true}, {"src_model", "spm.model"}, {"tgt_model", "spm.model"},
                                    {"src_size", kVocab}, {"tgt_size", kVocab}}}};
  std::ofstream(dir + "/meta.json") << meta.dump();
  return dir;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  parla::runtime::tune_process(argc, argv);
  int threads = parla::runtime::apply(parla::RuntimeConfig{});
  int steps = argc > 1 ? std::max(2, std::atoi(argv[1])) : 6;
  std::vector<std::string> presets{"tiny", "base"};
  if (argc > 2) {
    presets.clear();
    std::stringstream ss(argv[2]);
    for (std::string p; std::getline(ss, p, ',');) presets.push_back(p);
  }
  const std::string device_spec = argc > 3 ? argv[3] : "cpu";
  std::vector<std::string> precisions{"fp32"};
  if (argc > 4) {
    precisions.clear();
    std::stringstream ss(argv[4]);
    for (std::string p; std::getline(ss, p, ',');) precisions.push_back(p);
  }
  const auto device = parla::runtime::resolve_device({device_spec, "bench_train device", 1, 0});
  std::string tmp = std::filesystem::temp_directory_path().string() + "/parla_bench_train";
  std::string data = make_dataset(tmp + "/data");
  std::printf("bench_train: parla-train loop vs bare forward+backward, %lld x %lld tokens per side, vocab %lld, "
              "%d threads, BLAS %s, device %s\n",
              (long long)kBatch, (long long)kLen + 1, (long long)kVocab, threads, parla::runtime::blas_name().c_str(),
              parla::runtime::describe_device(device).c_str());
  for (const auto& preset : presets)
  for (const auto& precision : precisions) {
    parla::config::ConfigBuilder b;
    b.set("model.preset", preset, "bench");
    b.set("data.dir", data, "bench");
    b.set("training.save_dir", tmp + "/run-" + preset, "bench");
    b.set("training.batch_tokens", 2 * kBatch * (kLen + 1), "bench");
    b.set("training.max_steps", steps, "bench");
    b.set("training.log_every", 1, "bench");
    b.set("training.valid_every", 0, "bench");
    b.set("training.valid_bleu", false, "bench");
    b.set("training.keep_last", 0, "bench");
    b.set("training.precision", precision, "bench");
    b.set("runtime.device", device_spec, "bench");
    auto cfg = b.build();
    const auto dtype = parla::runtime::resolve_precision(cfg.training.precision, device, "bench_train precision");

    // Bare forward + backward (+ the same loss) on one batch of the same shape, as bench_model.
    torch::manual_seed(1);
    auto model = parla::models::build_seq2seq(cfg.model, kVocab, kVocab);
    model->to(device);
    model->train();
    auto src = torch::randint(4, kVocab, {kBatch, kLen + 1}, torch::kLong).to(device);
    auto tgt_in = torch::randint(4, kVocab, {kBatch, kLen + 1}, torch::kLong).to(device);
    auto tgt_out = torch::randint(4, kVocab, {kBatch, kLen + 1}, torch::kLong).to(device);
    std::vector<double> bare;
    for (int it = 0; it <= steps; ++it) {
      auto start = std::chrono::steady_clock::now();
      model->zero_grad();
      torch::Tensor loss;
      {
        parla::runtime::AutocastScope autocast(device, dtype);
        auto l = parla::train::label_smoothed_cross_entropy(model->forward(src, tgt_in), tgt_out, 0.1, 0);
        loss = l.loss / l.tokens.item<double>();
      }
      loss.backward();
      if (device.is_cuda()) torch::cuda::synchronize();
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (it > 0) bare.push_back(s);
    }
    model.reset();
    const double tokens = 2.0 * kBatch * (kLen + 1);
    double bare_tps = tokens / median(bare);

    parla::train::TrainerOptions o;
    o.overwrite = true;
    parla::train::Trainer(cfg, o).run();
    std::vector<double> tps;
    std::ifstream in(cfg.training.save_dir + "/metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line);
      if (j["type"] == "train" && j["step"].get<int>() > 1) tps.push_back(j["tokens_per_second"].get<double>());
    }
    double loop_tps = median(tps);
    double flops_per_token = 3 * forward_flops(cfg.model, kBatch * (kLen + 1), kBatch * (kLen + 1), kLen + 1,
                                               kLen + 1, kVocab) / tokens;
    std::printf("%-5s %s d=%d ffn=%d layers=%d+%d: loop %.0f src+tgt tok/s (%.1f GFLOP/s), bare fwd+bwd %.0f tok/s "
                "(%.1f GFLOP/s); loop/bare = %.2f (%d steps)\n",
                preset.c_str(), precision.c_str(), cfg.model.d_model, cfg.model.ffn_dim, cfg.model.encoder_layers,
                cfg.model.decoder_layers, loop_tps, loop_tps * flops_per_token / 1e9, bare_tps,
                bare_tps * flops_per_token / 1e9, loop_tps / bare_tps, steps);
    std::fflush(stdout);
  }
  return 0;
}

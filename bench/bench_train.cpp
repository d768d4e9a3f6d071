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
//        bench_train --count-ops MODELS [device=cpu] [precision=fp32] [layers=preset's]
//   what a GPU pays for per update (runtime/operator_counter.h), one line per model and depth:
//   "count-ops MODEL: operators per update T (forward F, backward B, update U), host syncs per update H, distinct
//   batch shapes S". Counted over updates 2..5 (the first makes AdamW's state); MODELS and layers are comma lists,
//   e.g. bench_train --count-ops tiny,base cpu fp32 3,6,12.
//        bench_train --count-shapes DATA_DIR BATCH_TOKENS [multiples=1,8] [max_len=256]
//   distinct batch shapes (rows x source width x target width) in epoch 1 of a preprocessed dataset at each
//   data.pad_to_multiple, e.g. the Multi30k recipe's: bench_train --count-shapes data/multi30k 4096.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <tuple>
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
#include "data/batch_sampler.h"
#include "runtime/operator_counter.h"
#include "data/token_dataset.h"
#include "train/trainer.h"
#include "train/translation_task.h"

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

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string p; std::getline(ss, p, ',');) out.push_back(p);
  return out;
}

parla::Config bench_config(const std::string& preset, const std::string& data, const std::string& save_dir,
                           int steps, const std::string& precision, const std::string& device_spec) {
  parla::config::ConfigBuilder b;
  b.set("model.preset", preset, "bench");
  b.set("data.dir", data, "bench");
  b.set("training.save_dir", save_dir, "bench");
  b.set("training.batch_tokens", 2 * kBatch * (kLen + 1), "bench");
  b.set("training.max_steps", steps, "bench");
  b.set("training.log_every", 1, "bench");
  b.set("training.valid_every", 0, "bench");
  b.set("training.valid_bleu", false, "bench");
  b.set("training.keep_last", 0, "bench");
  b.set("training.precision", precision, "bench");
  b.set("runtime.device", device_spec, "bench");
  return b.build();
}

// The operators of `steps` updates of parla-train's loop.
parla::runtime::OperatorCounts count_run(parla::Config cfg, int steps) {
  cfg.training.max_steps = steps;
  cfg.training.log_every = 1000;  // progress lines (one host read each) only at the end, in both runs: they cancel
  parla::train::TrainerOptions o;
  o.overwrite = true;
  parla::runtime::OperatorCounter counter;
  parla::train::Trainer(cfg, o).run();
  return counter.counts();
}

// The --count-ops lines: updates 2..5 (counts of 5 updates minus those of the first).
int count_ops(const std::string& models, const std::string& device_spec, const std::string& precision,
              const std::string& layers, const std::string& data, const std::string& tmp) {
  const int kCounted = 4;
  for (const auto& preset : split_list(models)) {
    std::vector<std::string> depths = layers.empty() ? std::vector<std::string>{""} : split_list(layers);
    for (const auto& depth : depths) {
      auto cfg = bench_config(preset, data, tmp + "/count-" + preset, 1, precision, device_spec);
      if (!depth.empty()) cfg.model.encoder_layers = cfg.model.decoder_layers = std::stoi(depth);
      const auto first = count_run(cfg, 1), all = count_run(cfg, 1 + kCounted);
      auto per = [&](int64_t a, int64_t b) { return static_cast<double>(a - b) / kCounted; };
      // Distinct batch shapes of an epoch: the synthetic pairs all have one length, so a shape is a batch's rows.
      parla::data::LengthTable table;
      for (int64_t i = 0; i < 4096; ++i) {
        table.ids.push_back(i);
        table.src_len.push_back(kLen + 1);
        table.tgt_len.push_back(kLen + 1);
      }
      std::set<size_t> shapes;
      for (const auto& batch : parla::data::plan_epoch(table, cfg.training.batch_tokens, 1, 1))
        shapes.insert(batch.size());
      std::printf("count-ops %s%s: operators per update %.0f (forward %.0f, backward %.0f, update %.0f, other %.0f), "
                  "host syncs per update %.2f, distinct batch shapes %zu  [%s %s, %d+%d layers]\n",
                  preset.c_str(), depth.empty() ? "" : ("@" + depth).c_str(), per(all.total(), first.total()),
                  per(all.forward, first.forward), per(all.backward, first.backward), per(all.update, first.update),
                  per(all.other, first.other), per(all.host_syncs, first.host_syncs), shapes.size(),
                  device_spec.c_str(), precision.c_str(), cfg.model.encoder_layers, cfg.model.decoder_layers);
      auto by_name = [&](const char* what, const std::map<std::string, int64_t>& a,
                         const std::map<std::string, int64_t>& b) {
        std::printf("  %s:", what);
        for (const auto& [name, n] : a) {
          const auto it = b.find(name);
          const double each = per(n, it == b.end() ? 0 : it->second);
          if (each != 0) std::printf(" %s %g", name.c_str(), each);
        }
        std::printf("\n");
      };
      by_name("update operators", all.update_ops, first.update_ops);
      by_name("other operators", all.other_ops, first.other_ops);
      by_name("host syncs outside HostReads", all.sync_ops, first.sync_ops);
      std::fflush(stdout);
    }
  }
  return 0;
}

// The --count-shapes lines.
int count_shapes(const std::string& dir, int64_t batch_tokens, const std::string& multiples, int64_t max_len) {
  const auto info = parla::data::read_dataset_info(dir);
  const auto split = parla::data::open_split(info, "train");
  const auto exact = parla::data::filter_by_length(parla::train::sentence_lengths(split.src),
                                                   parla::train::sentence_lengths(split.tgt), max_len);
  for (const auto& text : split_list(multiples)) {
    const int64_t m = std::max(1, std::stoi(text));
    const auto plan = parla::data::plan_epoch(parla::data::padded_lengths(exact, m), batch_tokens, 1, 1);
    std::set<std::tuple<size_t, int64_t, int64_t>> shapes;
    std::set<std::pair<int64_t, int64_t>> widths;
    double real = 0, padded = 0;
    for (const auto& batch : plan) {
      int64_t s = 0, t = 0;
      for (int64_t id : batch) {
        s = std::max<int64_t>(s, static_cast<int64_t>(split.src.length(static_cast<size_t>(id))) + 1);
        t = std::max<int64_t>(t, static_cast<int64_t>(split.tgt.length(static_cast<size_t>(id))) + 1);
        real += static_cast<double>(split.src.length(static_cast<size_t>(id)) + split.tgt.length(static_cast<size_t>(id)) + 2);
      }
      s = (s + m - 1) / m * m;
      t = (t + m - 1) / m * m;
      shapes.insert({batch.size(), s, t});
      widths.insert({s, t});
      padded += static_cast<double>(batch.size()) * static_cast<double>(s + t);
    }
    std::printf("count-shapes %s, batch_tokens %lld, data.pad_to_multiple %lld: %zu batches, %zu distinct shapes "
                "(%zu distinct widths), %.1f%% of the padded tokens real\n",
                dir.c_str(), (long long)batch_tokens, (long long)m, plan.size(), shapes.size(), widths.size(),
                100 * real / padded);
  }
  return 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  parla::runtime::tune_process(argc, argv);
  int threads = parla::runtime::apply(parla::RuntimeConfig{});
  const std::string tmp_root = std::filesystem::temp_directory_path().string() + "/parla_bench_train";
  if (argc > 1 && std::string(argv[1]) == "--count-shapes") {
    if (argc < 4) {
      std::fprintf(stderr, "usage: bench_train --count-shapes DATA_DIR BATCH_TOKENS [multiples=1,8] [max_len=256]\n");
      return 2;
    }
    return count_shapes(argv[2], std::stoll(argv[3]), argc > 4 ? argv[4] : "1,8", argc > 5 ? std::stoll(argv[5]) : 256);
  }
  if (argc > 1 && std::string(argv[1]) == "--count-ops") {
    if (argc < 3) {
      std::fprintf(stderr, "usage: bench_train --count-ops MODELS [device=cpu] [precision=fp32] [layers]\n");
      return 2;
    }
    return count_ops(argv[2], argc > 3 ? argv[3] : "cpu", argc > 4 ? argv[4] : "fp32", argc > 5 ? argv[5] : "",
                     make_dataset(tmp_root + "/data"), tmp_root);
  }
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
  const std::string& tmp = tmp_root;
  std::string data = make_dataset(tmp + "/data");
  std::printf("bench_train: parla-train loop vs bare forward+backward, %lld x %lld tokens per side, vocab %lld, "
              "%d threads, BLAS %s, device %s\n",
              (long long)kBatch, (long long)kLen + 1, (long long)kVocab, threads, parla::runtime::blas_name().c_str(),
              parla::runtime::describe_device(device).c_str());
  for (const auto& preset : presets)
  for (const auto& precision : precisions) {
    auto cfg = bench_config(preset, data, tmp + "/run-" + preset, steps, precision, device_spec);
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

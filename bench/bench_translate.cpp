// Translation speed: sentences/s, target tokens/s and peak RSS of batched beam search with the `tiny` and
// `base` presets (random weights: speed does not depend on training; untrained models rarely emit EOS, so
// outputs run to the length limit, a pessimistic load), beam 1 and 5, batch sizes 1/16/64, against the naive
// baseline: no incremental state, re-running forward(src, prefix) on the whole prefix every step, batch 1.
//   bench_translate [sentences=1000] [naive_sentences=50] [presets=tiny,base]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>

#include <torch/torch.h>

#include "batched_search.h"
#include "core/config.h"
#include "runtime/runtime.h"
#include "decode/maxi_batch.h"
#include "decode/search.h"
#include "models/factory.h"

using namespace parla;

namespace {

// The naive baseline as a Seq2SeqModel: its "state" is the source and the whole prefix, and every step re-runs
// the full decoder over the prefix (and the encoder over the source) with no cache.
class UncachedState : public models::DecoderState {
 public:
  torch::Tensor src, prefix;
  void reorder(const torch::Tensor& idx) override {
    src = src.index_select(0, idx);
    prefix = prefix.index_select(0, idx);
  }
  int64_t steps() const override { return prefix.size(1) - 1; }
};

class Uncached : public models::Seq2SeqModel {
 public:
  explicit Uncached(std::shared_ptr<models::Seq2SeqModel> m) : m_(std::move(m)) {}
  std::unique_ptr<models::DecoderState> start(const torch::Tensor& src) override {
    auto s = std::make_unique<UncachedState>();
    s->src = src;
    s->prefix = torch::empty({src.size(0), 0}, torch::kLong);
    return s;
  }
  torch::Tensor step(const torch::Tensor& prev, models::DecoderState& state, torch::Tensor*) override {
    auto& s = static_cast<UncachedState&>(state);
    s.prefix = torch::cat({s.prefix, prev.unsqueeze(1)}, 1);
    return torch::log_softmax(m_->forward(s.src, s.prefix).select(1, -1), -1);
  }
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt) override { return m_->forward(src, tgt); }
  int64_t vocab_size() const override { return m_->vocab_size(); }
  int64_t max_positions() const override { return m_->max_positions(); }

 private:
  std::shared_ptr<models::Seq2SeqModel> m_;
};

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

bench::SearchRate run(models::Seq2SeqModel& model, const std::vector<std::vector<int64_t>>& sents, int beam, size_t batch) {
  decode::SearchOptions o;
  o.beam_size = beam;
  return bench::batched_search(model, sents, o, batch);
}

}  // namespace

int main(int argc, char** argv) {
  runtime::tune_process(argc, argv);
  size_t n = argc > 1 ? std::stoul(argv[1]) : 1000, naive_n = argc > 2 ? std::stoul(argv[2]) : 50;
  std::string presets = argc > 3 ? argv[3] : "tiny,base";
  RuntimeConfig rc;
  int threads = runtime::apply(rc);
  torch::NoGradGuard no_grad;
  std::mt19937 rng(1);
  const int64_t vocab = 8000;
  std::vector<std::vector<int64_t>> sents(n);
  for (auto& s : sents) {
    s.resize(5 + rng() % 26);  // 5-30 source pieces, like Europarl sentences in 8k pieces
    for (auto& t : s) t = 4 + static_cast<int64_t>(rng() % (vocab - 4));
  }
  std::printf("bench_translate: %zu sentences (5-30 pieces), vocab %lld, %d threads, %s, random weights\n", n,
              static_cast<long long>(vocab), threads, runtime::blas_name().c_str());
  std::printf("%-6s %-5s %-6s %-7s %12s %12s %12s\n", "preset", "beam", "batch", "cache", "sent/s", "tokens/s",
              "peakRSS_MB");
  std::stringstream ps(presets);
  std::string preset;
  while (std::getline(ps, preset, ',')) {
    config::ConfigBuilder b;
    b.set("model.preset", preset, "bench");
    b.set("model.dropout", 0.0, "bench");
    auto cfg = b.build();
    torch::manual_seed(1);
    auto model = models::build_seq2seq(cfg.model, vocab, vocab);
    model->eval();
    for (int beam : {1, 5}) {
      std::vector<std::vector<int64_t>> naive_set(sents.begin(), sents.begin() + std::min(naive_n, n));
      Uncached naive(model);
      auto r = run(naive, naive_set, beam, 1);
      std::printf("%-6s %-5d %-6d %-7s %12.2f %12.1f %12.0f\n", preset.c_str(), beam, 1, "none", r.sentences_per_s,
                  r.tokens_per_s, peak_rss_mb());
      std::fflush(stdout);
      for (size_t batch : {1, 16, 64}) {
        // Batch 1 runs on a subset too: it is the slow configuration and its rate does not depend on n.
        std::vector<std::vector<int64_t>> set = batch == 1 ? naive_set : sents;
        auto c = run(*model, set, beam, batch);
        std::printf("%-6s %-5d %-6zu %-7s %12.2f %12.1f %12.0f\n", preset.c_str(), beam, batch, "kv",
                    c.sentences_per_s, c.tokens_per_s, peak_rss_mb());
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

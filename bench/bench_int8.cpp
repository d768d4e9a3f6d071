// int8 decoding against fp32 in the same process: target tokens/s of batched beam search at batch 1 and 64, beam
// 1 and 5, rounds alternating between the two precisions so that machine load hits both alike.
//
// Models: the trained checkpoint given (its sources are the first lines of `source_file`, encoded with the
// checkpoint's SentencePiece model; outputs are the model's own, so both precisions may emit different lengths:
// tokens/s counts what each emitted), and a base-size Transformer (preset base: d_model 512, 6+6 layers, ffn 2048,
// vocabulary 32,000 shared and tied) with random weights whose outputs are forced to 30 tokens (min = max length),
// so that both precisions do exactly the same work. Batch 1 runs on the first `batch1_sentences` sentences.
// Prints the instruction set oneDNN uses (ONEDNN_MAX_CPU_ISA=AVX2 forces the AVX2 path) and the BLAS of fp32.
//   bench_int8 CHECKPOINT SOURCE_FILE [sentences=512] [batch1_sentences=64] [rounds=3] [models=trained,base]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "batched_search.h"
#include "core/config.h"
#include "runtime/runtime.h"
#include "decode/maxi_batch.h"
#include "decode/search.h"
#include "models/checkpoint.h"
#include "models/factory.h"
#include "models/int8_quantization.h"
#include "kernels/int8_gemm.h"
#include "text/sentencepiece_vocab.h"

using namespace parla;

namespace {

using Sentences = std::vector<std::vector<int64_t>>;

double tokens_per_second(models::Seq2SeqModel& model, const Sentences& sents, const decode::SearchOptions& o,
                         size_t batch) {
  return bench::batched_search(model, sents, o, batch).tokens_per_s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void compare(const std::string& name, models::Seq2SeqModel& fp32, models::Seq2SeqModel& int8, const Sentences& sents,
             size_t batch1_sentences, int rounds, decode::SearchOptions o) {
  const Sentences small(sents.begin(), sents.begin() + std::min(batch1_sentences, sents.size()));
  for (int beam : {1, 5}) {
    for (size_t batch : {size_t{1}, size_t{64}}) {
      o.beam_size = beam;
      const Sentences& set = batch == 1 ? small : sents;
      std::vector<double> a, b;
      for (int r = 0; r < rounds; ++r) {
        a.push_back(tokens_per_second(fp32, set, o, batch));
        b.push_back(tokens_per_second(int8, set, o, batch));
      }
      std::printf("| %s | %d | %zu | %zu | %.0f | %.0f | %.2fx |\n", name.c_str(), beam, batch, set.size(), median(a),
                  median(b), median(b) / median(a));
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  runtime::tune_process(argc, argv);
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_int8 CHECKPOINT SOURCE_FILE [sentences] [batch1_sentences] [rounds] [models]\n");
    return 2;
  }
  const std::string checkpoint = argv[1], source_file = argv[2];
  const size_t n = argc > 3 ? std::stoul(argv[3]) : 512, n1 = argc > 4 ? std::stoul(argv[4]) : 64;
  const int rounds = argc > 5 ? std::stoi(argv[5]) : 3;
  const std::string which = argc > 6 ? argv[6] : "trained,base";
  const int threads = runtime::apply(RuntimeConfig{});
  torch::NoGradGuard no_grad;
  const auto& code = kernels::int8::activation_code();
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("bench_int8: %d threads, fp32 through %s (OPENBLAS_CORETYPE %s), int8 through oneDNN on %s "
              "(activations in [-%d, %d])\n",
              threads, runtime::blas_name().c_str(), coretype ? coretype : "unset", code.isa.c_str(), code.levels,
              code.levels);
  std::printf("| model | beam | batch | sentences | fp32 tokens/s | int8 tokens/s | int8 / fp32 |\n"
              "|---|---|---|---|---|---|---|\n");

  if (which.find("trained") != std::string::npos) {
    auto fp32 = models::load_seq2seq(checkpoint);
    auto int8 = models::load_seq2seq(checkpoint);
    models::quantize_int8(*int8.model);
    auto vocab = text::SentencePieceVocab::from_serialized(fp32.meta.src_spm);
    Sentences sents;
    std::ifstream in(source_file);
    std::string line;
    while (sents.size() < n && std::getline(in, line)) {
      auto ids = vocab.encode(line);
      sents.emplace_back(ids.begin(), ids.end());
    }
    compare("trained", *fp32.model, *int8.model, sents, n1, rounds, decode::SearchOptions{});
  }
  if (which.find("base") != std::string::npos) {
    config::ConfigBuilder b;
    b.set("model.preset", std::string("base"), "bench");
    b.set("model.dropout", 0.0, "bench");
    auto cfg = b.build();
    const int64_t vocab = 32000;
    torch::manual_seed(1);
    auto fp32 = models::build_seq2seq(cfg.model, vocab, vocab);
    torch::manual_seed(1);
    auto int8 = models::build_seq2seq(cfg.model, vocab, vocab);
    fp32->eval();
    int8->eval();
    models::quantize_int8(*int8);
    std::mt19937 rng(1);
    Sentences sents(n);
    for (auto& s : sents) {
      s.resize(10 + rng() % 21);
      for (auto& t : s) t = 4 + static_cast<int64_t>(rng() % (vocab - 4));
    }
    decode::SearchOptions o;
    o.min_length = 30;  // every output exactly 30 tokens: the same work in both precisions
    o.max_length_factor = 0;
    o.max_length_offset = 30;
    compare("base (random)", *fp32, *int8, sents, n1, rounds, o);
  }
  return 0;
}

// One Transformer decoder step, taken apart: microseconds per step of the whole model step (embedding, decoder
// stack, output layer and log-softmax), of the decoder stack alone, and of the output layer alone, at beam 5 over
// batch 1 and 64 sentences (5 and 320 rows), int8 and fp32 (packed where the CPU packs), over the first 20 steps
// after the encoder (the self-attention cache grows as in a translation). Rounds alternate between the fused CPU
// decoder step (models/fused_decoder_step.h) and the module path, so that machine load hits both alike.
//   bench_decoder_step CHECKPOINT SOURCE_FILE [rounds=7] [precisions=fp32,int8] [batches=1,64] [threads=1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "decode/search.h"
#include "median_time.h"
#include "models/checkpoint.h"
#include "models/fused_decoder_step.h"
#include "models/int8_quantization.h"
#include "models/packed_fp32.h"
#include "models/transformer.h"
#include "runtime/runtime.h"
#include "text/sentencepiece_vocab.h"

using namespace parla;

namespace {

constexpr int kBeam = 5, kSteps = 20;

struct Times {
  std::vector<double> step, stack, output, embedding;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Microseconds per step of model.step, of decoder->step and of the output layer, over kSteps steps.
void measure(models::TransformerModel& model, const torch::Tensor& src, Times& t) {
  using clock = std::chrono::steady_clock;
  const int64_t B = src.size(0), N = B * kBeam;
  auto rows = torch::arange(B, torch::kLong).repeat_interleave(kBeam);
  auto prev = torch::full({N}, model.start_id(), torch::kLong);
  auto tokens = torch::randint(4, model.vocab_size(), {kSteps, N}, torch::kLong);

  auto state = model.start(src);
  state->reorder_beams(rows, {}, kBeam);
  auto t0 = clock::now();
  for (int s = 0; s < kSteps; ++s) model.step(s == 0 ? prev : tokens[s - 1], *state);
  t.step.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count() / kSteps);

  auto fresh = model.start(src);
  fresh->reorder_beams(rows, {}, kBeam);
  auto& ts = dynamic_cast<models::TransformerState&>(*fresh);
  auto x = torch::randn({N, 1, model.config().d_model});
  auto t1 = clock::now();
  for (int s = 0; s < kSteps; ++s) model.decoder->step(x, ts.cache, ts.memory_valid);
  t.stack.push_back(std::chrono::duration<double, std::micro>(clock::now() - t1).count() / kSteps);

  auto h = torch::randn({N, model.config().d_model});
  auto t2 = clock::now();
  for (int s = 0; s < kSteps; ++s) torch::log_softmax(model.output_logits(h), -1);
  t.output.push_back(std::chrono::duration<double, std::micro>(clock::now() - t2).count() / kSteps);

  auto ids = prev.view({-1, 1});
  auto t3 = clock::now();
  for (int s = 0; s < kSteps; ++s)
    model.tgt_embed(ids) + model.tgt_positions(1, s, model.tgt_embed->weight.options()).to(torch::kFloat);
  t.embedding.push_back(std::chrono::duration<double, std::micro>(clock::now() - t3).count() / kSteps);
}

}  // namespace

int main(int argc, char** argv) {
  runtime::tune_process(argc, argv);
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_decoder_step CHECKPOINT SOURCE_FILE [rounds] [precisions] [batches] [threads]\n");
    return 2;
  }
  const std::string checkpoint = argv[1], source_file = argv[2];
  const int rounds = argc > 3 ? std::stoi(argv[3]) : 7;
  const std::string precisions = argc > 4 ? argv[4] : "fp32,int8";
  const auto batches = bench::parse_counts(argc > 5 ? argv[5] : "1,64");
  RuntimeConfig runtime_config;
  runtime_config.threads = argc > 6 ? std::stoi(argv[6]) : 1;
  const int threads = runtime::apply(runtime_config);
  torch::NoGradGuard no_grad;
  torch::manual_seed(1);
  std::printf("bench_decoder_step: %d threads, beam %d, %d steps; us per step: model step (embedding + stack + "
              "output layer) / decoder stack / output layer + log-softmax / target embedding + positions\n",
              threads, kBeam, kSteps);
  std::printf("| precision | batch | rows | path | model step | decoder stack | output layer | embedding |\n"
              "|---|---|---|---|---|---|---|---|\n");
  for (const std::string precision : {"fp32", "int8"}) {
    if (precisions.find(precision) == std::string::npos) continue;
    auto loaded = models::load_seq2seq(checkpoint);
    auto* model = dynamic_cast<models::TransformerModel*>(loaded.model.get());
    if (!model) {
      std::fprintf(stderr, "bench_decoder_step: %s is not a Transformer\n", checkpoint.c_str());
      return 2;
    }
    model->eval();
    const bool packed = precision == "int8" ? (models::quantize_int8(*model), false) : models::pack_fp32(*model);
    auto vocab = text::SentencePieceVocab::from_serialized(loaded.meta.src_spm);
    std::ifstream in(source_file);
    std::vector<std::vector<int64_t>> sents;
    std::string line;
    while (sents.size() < 64 && std::getline(in, line)) {
      auto ids = vocab.encode(line);
      sents.emplace_back(ids.begin(), ids.end());
    }
    for (int64_t batch : batches) {
      const int64_t B = std::min<int64_t>(batch, static_cast<int64_t>(sents.size()));
      size_t width = 0;
      for (int64_t r = 0; r < B; ++r) width = std::max(width, sents[r].size() + 1);
      auto src = torch::full({B, static_cast<int64_t>(width)}, kPadId, torch::kLong);
      for (int64_t r = 0; r < B; ++r) {
        for (size_t j = 0; j < sents[r].size(); ++j) src[r][j] = sents[r][j];
        src[r][sents[r].size()] = kEosId;
      }
      Times fused, modules;
      for (int r = 0; r < rounds; ++r) {
        model->decoder->use_fused_step(true);
        measure(*model, src, fused);
        model->decoder->use_fused_step(false);
        measure(*model, src, modules);
      }
      // The whole search of these sentences one at a time (beam 5), and the encoder with the cross-attention keys and
      // values of each (start), per sentence: what a step's time does not show.
      if (B == 1) {
        decode::SearchOptions o;
        o.beam_size = kBeam;
        std::vector<double> search_us, start_us;
        int64_t tokens = 0;
        for (int r = 0; r < rounds; ++r) {
          auto t0 = std::chrono::steady_clock::now();
          tokens = 0;
          for (const auto& s : sents) {
            auto one = torch::tensor(s, torch::kLong);
            one = torch::cat({one, torch::tensor({int64_t{kEosId}})}).unsqueeze(0);
            for (auto& list : decode::search(*model, one, o)) tokens += static_cast<int64_t>(list[0].tokens.size()) + 1;
          }
          search_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
          auto t1 = std::chrono::steady_clock::now();
          for (const auto& s : sents) {
            auto one = torch::tensor(s, torch::kLong);
            one = torch::cat({one, torch::tensor({int64_t{kEosId}})}).unsqueeze(0);
            model->start(one);
          }
          start_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count());
        }
        std::printf("search of %zu sentences one at a time: %.1f us per target token (with EOS), %.0f us per "
                    "sentence, of which start (encoder, cross keys/values) %.0f us\n",
                    sents.size(), median(search_us) / tokens, median(search_us) / sents.size(),
                    median(start_us) / sents.size());
      }
      const bool available = models::fused_step_supported(*model->decoder);
      model->decoder->use_fused_step(true);
      for (auto* t : {&fused, &modules})
        std::printf("| %s%s | %lld | %lld | %s | %.1f | %.1f | %.1f | %.1f |\n", precision.c_str(),
                    precision == "fp32" ? (packed ? " packed" : " BLAS") : "", static_cast<long long>(B),
                    static_cast<long long>(B * kBeam),
                    t == &modules ? "modules" : available ? "fused" : "fused (n/a: modules)", median(t->step),
                    median(t->stack), median(t->output), median(t->embedding));
      std::fflush(stdout);
    }
  }
  return 0;
}

#include "decode/sampling.h"

#include <algorithm>
#include <limits>

#include <torch/torch.h>

#include "runtime/torch_compat.h"
#include "decode/single_path_search.h"

namespace parla::decode {

at::Generator make_generator(uint64_t seed, const c10::Device& device) { return compat::make_generator(device, seed); }

std::vector<NBestList> sample(models::Seq2SeqModel& model, const torch::Tensor& src, const SearchOptions& o,
                              at::Generator& generator) {
  // --n-best N draws N independent samples per sentence (as fairseq's --sampling --nbest): each source row is
  // repeated N times, and each sentence's samples are listed best score first. Samples may repeat.
  const int64_t n = std::max(1, o.n_best);
  auto rows = n > 1 ? src.repeat_interleave(n, 0) : src;
  auto samples = single_path_search(model, rows, o, [&](const torch::Tensor& logp) {
    auto logits = logp / o.temperature;
    if (o.top_k > 0 && o.top_k < logits.size(1)) {
      // Everything below the k-th largest value is excluded (ties at the threshold stay in).
      auto kth = std::get<0>(logits.topk(o.top_k, 1)).select(1, o.top_k - 1).unsqueeze(1);
      logits = logits.masked_fill(logits < kth, -std::numeric_limits<float>::infinity());
    }
    // multinomial draws on its generator's device; the search brings the choices to the host.
    auto probs = torch::softmax(logits, 1).to(generator.device());
    auto tokens = torch::multinomial(probs, 1, /*replacement=*/false, generator).to(logp.device());
    return std::make_pair(tokens.squeeze(1), logp.gather(1, tokens).squeeze(1));
  });
  if (n == 1) return samples;
  std::vector<NBestList> out(src.size(0));
  for (size_t r = 0; r < samples.size(); ++r)
    for (auto& h : samples[r]) out[r / n].push_back(std::move(h));
  for (auto& list : out)
    std::stable_sort(list.begin(), list.end(), [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
  return out;
}

}  // namespace parla::decode

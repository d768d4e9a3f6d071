#include "decode/sampling.h"

#include <limits>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "decode/single_path_search.h"

namespace parla::decode {

at::Generator make_generator(uint64_t seed) { return at::detail::createCPUGenerator(seed); }

std::vector<NBestList> sample(models::Seq2SeqModel& model, const torch::Tensor& src, const SearchOptions& o,
                              at::Generator& generator) {
  return single_path_search(model, src, o, [&](const torch::Tensor& logp) {
    auto logits = logp / o.temperature;
    if (o.top_k > 0 && o.top_k < logits.size(1)) {
      // Everything below the k-th largest value is excluded (ties at the threshold stay in).
      auto kth = std::get<0>(logits.topk(o.top_k, 1)).select(1, o.top_k - 1).unsqueeze(1);
      logits = logits.masked_fill(logits < kth, -std::numeric_limits<float>::infinity());
    }
    auto probs = torch::softmax(logits, 1).to(torch::kCPU);
    auto tokens = torch::multinomial(probs, 1, /*replacement=*/false, generator).squeeze(1).contiguous();
    auto chosen = logp.to(torch::kCPU).gather(1, tokens.unsqueeze(1)).squeeze(1).contiguous();
    return std::make_pair(tokens, chosen);
  });
}

}  // namespace parla::decode

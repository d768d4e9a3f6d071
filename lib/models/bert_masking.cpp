#include "models/bert_masking.h"

#include <algorithm>
#include <stdexcept>

#include <torch/torch.h>

namespace parla::models {

MlmExample mask_tokens(const torch::Tensor& tokens, std::mt19937_64& rng, const MlmMaskingOptions& options) {
  std::vector<int64_t> special = options.special_ids;
  special.push_back(options.mask_id);
  std::sort(special.begin(), special.end());
  std::vector<int64_t> ordinary;  // candidates for random replacement
  for (int64_t id = 0; id < options.vocab_size; ++id)
    if (!std::binary_search(special.begin(), special.end(), id)) ordinary.push_back(id);
  if (ordinary.empty()) throw std::invalid_argument("BERT masking: the vocabulary has no ordinary token");

  std::vector<int64_t> never = options.special_ids;  // never chosen: the special ids and the mask itself
  never.push_back(options.mask_id);
  std::sort(never.begin(), never.end());

  auto src = tokens.to(torch::kCPU, torch::kLong).contiguous();
  MlmExample ex{src.clone(), torch::full_like(src, kIgnoreIndex)};
  const int64_t* in = src.data_ptr<int64_t>();
  int64_t* out = ex.input.data_ptr<int64_t>();
  int64_t* lab = ex.labels.data_ptr<int64_t>();
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::uniform_int_distribution<size_t> pick(0, ordinary.size() - 1);
  for (int64_t i = 0; i < src.numel(); ++i) {
    bool is_special = std::binary_search(never.begin(), never.end(), in[i]);
    if (is_special || u(rng) >= options.mask_prob) continue;
    lab[i] = in[i];
    double r = u(rng);
    if (r < options.replace_with_mask)
      out[i] = options.mask_id;
    else if (r < options.replace_with_mask + options.replace_with_random)
      out[i] = ordinary[pick(rng)];
  }
  ex.input = ex.input.to(tokens.device());
  ex.labels = ex.labels.to(tokens.device());
  return ex;
}

}  // namespace parla::models

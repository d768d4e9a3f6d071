#pragma once
// The masked-LM corruption of BERT (Devlin et al. 2019, Sec. 3.1 and Appendix A.1): each maskable token is
// chosen with probability 15%; a chosen token is replaced by the mask token 80% of the time, by a random token
// 10% of the time and left unchanged 10% of the time. Labels hold the original token at chosen positions and
// kIgnoreIndex elsewhere, so the loss sees only the chosen positions.
#include <cstdint>
#include <random>
#include <vector>

#include <torch/types.h>

namespace parla::models {

inline constexpr int64_t kIgnoreIndex = -100;

struct MlmMaskingOptions {
  int64_t vocab_size = 0;
  int64_t mask_id = 4;
  std::vector<int64_t> special_ids{0, 1, 2, 3};  // never chosen, never drawn as random replacements (nor is mask_id)
  double mask_prob = 0.15;
  double replace_with_mask = 0.8;
  double replace_with_random = 0.1;  // the rest stays unchanged
};

struct MlmExample {
  torch::Tensor input;   // int64, same shape as tokens
  torch::Tensor labels;  // int64, original token where chosen, kIgnoreIndex elsewhere
};

// tokens: int64 tensor of any shape. Deterministic for a given rng state. Throws std::invalid_argument when
// the options leave no token to draw as a random replacement.
MlmExample mask_tokens(const torch::Tensor& tokens, std::mt19937_64& rng, const MlmMaskingOptions& options);

}  // namespace parla::models

#pragma once
// Label-smoothed cross entropy (Szegedy et al. 2016, "Rethinking the Inception Architecture", section 7; used by
// the Transformer with epsilon = 0.1). As in fairseq's label_smoothed_cross_entropy criterion, the smoothing mass
// epsilon is spread over the V-1 classes other than the reference, so the target distribution is
//   q(k) = 1 - epsilon for k = y,  epsilon / (V - 1) otherwise,
// and the per-token loss is  -sum_k q(k) log p(k) = (1 - epsilon - e_i) nll + e_i * sum_k (-log p(k)),
// with e_i = epsilon / (V - 1) and nll = -log p(y). Padding positions contribute nothing.
#include <cstdint>

#include <torch/types.h>

namespace parla::train {

struct TokenLoss {
  torch::Tensor loss;  // scalar: SUM over non-pad tokens of the smoothed loss (differentiable)
  torch::Tensor nll;   // scalar: SUM of -log p(y) over non-pad tokens (detached), for perplexity
  // Scalar int64 on the logits' device: non-pad target tokens. A tensor, so that computing the loss never waits
  // for the device (the trainer knows the counts from the CPU batch).
  torch::Tensor tokens;
};

// logits [..., V] (unnormalised), target [...] int64. Sums over tokens; the trainer divides by the token count of
// the whole update (all batches and ranks), so that gradient accumulation and data parallelism are exact.
TokenLoss label_smoothed_cross_entropy(const torch::Tensor& logits, const torch::Tensor& target, double epsilon,
                                       int64_t pad_id);

}  // namespace parla::train

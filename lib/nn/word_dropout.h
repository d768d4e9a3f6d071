#pragma once
// Word dropout: in training, each token's whole embedding is dropped with probability p (zeroed, every
// coordinate at once) and the kept ones are scaled by 1 / (1 - p), so the expected input is unchanged. This is
// the token-level word dropout of Sennrich et al. (2016, "Edinburgh Neural Machine Translation Systems for WMT
// 16"; Marian's --dropout-src / --dropout-trg): the model cannot rely on any one word being there, a
// regulariser for small corpora. Padding rows are already zero, so dropping them changes nothing.
#include <torch/types.h>

namespace parla::nn {

// embeddings [B, T, E] -> the same with whole [E] rows dropped; identity when p == 0 or not training.
// Draws from the global generator (torch::manual_seed makes it reproducible).
torch::Tensor word_dropout(const torch::Tensor& embeddings, double p, bool training);

}  // namespace parla::nn

#pragma once
// Greedy search's choice made from the output layer's logits instead of its log-probabilities, for a search that
// does not report scores (CTranslate2 likewise skips the softmax unless return_scores is asked for): the
// log-softmax over the vocabulary, its [N, V] result and the row maximum over it were a sixth of a greedy
// search at batch 64.
//
// log_softmax(x)_j = x_j - max(x) - log(sum exp(x - max)) keeps the order of the logits, but in floats it can
// merge two nearly equal ones: with x_a < x_b, (x_a - M) - L may round to (x_b - M) - L, and the maximum's
// first occurrence is then a, where the logits' is b. The rounding moves values by less than a few units in the
// last place of |M| + L, and L = log(sum exp(x - M)) <= log V; so wherever the best logit leads every other one
// by more than tau = (|M| + 32) / 2^18 (>= 16 such units for V < 2^24), both orders agree and the logits decide.
// Rows closer than that, rows with NaN or infinite logits, and rows whose largest logit is a token the step
// forbids (PAD, the start token, EOS before the minimum length) are left to the log-softmax itself: the token is
// always the one greedy search over the log-probabilities picks, bit for bit.
#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace parla::decode {

// The largest entry of x[0..n), the index of its first occurrence, the largest of all other entries (a tie
// with the best counts: second == best) and whether a NaN was seen.
struct RowTop {
  float best;
  int64_t index;
  float second;
  bool nan;
};
RowTop row_top(const float* x, int64_t n);

// logits [N, V] (float, CPU, contiguous) of rows that have `step` tokens so far, row r's limit max_len[r]: per
// row the token that constrain_step's rules and the first maximum of the log-softmax give, or -1 where the
// logits alone cannot be sure of it (see above).
std::vector<int64_t> greedy_tokens_from_logits(const torch::Tensor& logits, int64_t step,
                                               const std::vector<int64_t>& max_len, int64_t min_length,
                                               int64_t start_id);

// The same for every row: undecided rows get their log-softmax (ATen's, row by row the same bits as over the whole
// batch), the step constraints and its first maximum, exactly as greedy search over log-probabilities.
// Returns int64 [N] on the CPU.
torch::Tensor greedy_choice(const torch::Tensor& logits, int64_t step, const std::vector<int64_t>& max_len,
                            int64_t min_length, int64_t start_id);

}  // namespace parla::decode

#pragma once
// The log-softmax of a row of logits, log p(v) = x(v) - log sum_w e^(x(w)), the output distribution of every
// model in the decks (softmax, Eq. 1 of "attention" / the decoder's output layer). Computed as
// x(v) - lse with lse = max + log sum_w e^(x(w) - max): the shift keeps every exponent <= 0, and one number per
// row lets a beam search read log-probabilities straight from the logits (decode/beam_candidates.h) instead of
// writing them out. Torch-free; the same bits whichever instruction set runs it, except where a CPU fuses a
// multiply-add (kernels/exp_nonpositive.h), and the same bits for a row in any batch.
#include <cstdint>

namespace parla::kernels {

// max + log sum e^(x - max) over x[0..n): kLanes running sums of e^(x - max) (element i in lane i % 16), the lanes
// added in order in double. NaN when a logit is NaN or +inf, or when every logit is -inf (no distribution), as
// LibTorch's log_softmax; -inf for n == 0.
float log_sum_exp(const float* x, int64_t n);

// out[i] = x[i] - log_sum_exp(x, n); out may be x.
void log_softmax(const float* x, int64_t n, float* out);

// out[i] = x[i] - c, the last step of log_softmax (a row whose log-sum-exp is already known); out may be x.
void subtract(const float* x, int64_t n, float c, float* out);

}  // namespace parla::kernels

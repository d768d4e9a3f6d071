#pragma once
// Candidate selection for one beam-search step: of every continuation (beam k, token v) of a sentence's
// hypotheses, the `count` best by score + log p(v). A scan with a running threshold reads each log-probability
// once and keeps only the few candidates that beat it, instead of adding the scores into a new [N, V] tensor
// and running a general top-k over it (which copies every row into a (value, index) buffer first).
#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace parla::decode {

struct Candidate {
  float score;    // hypothesis score + log p(token)
  int64_t index;  // beam * V + token
};

// logp: [A * beam, V] log-probabilities, rows a*beam .. a*beam+beam-1 belonging to sentence a; row_score: the
// score of each row's hypothesis (-inf for dead rows). Returns per sentence up to `count` candidates ordered by
// score descending, then index ascending: a total order, so the choice among equal scores does not depend on
// the batch. -inf and NaN totals are never candidates.
// With `row_shift` (one per row), `logp` holds logits and row r's log-probabilities are logp[r][v] - row_shift[r]
// (nn/log_softmax.h's row_log_sum_exp): the same candidates, to the bit, as from the written-out log_softmax, without
// writing it. An empty row_shift reads logp as it is.
std::vector<std::vector<Candidate>> best_candidates(const torch::Tensor& logp, const std::vector<float>& row_score,
                                                    int64_t beam, int64_t count,
                                                    const std::vector<float>& row_shift = {});

}  // namespace parla::decode

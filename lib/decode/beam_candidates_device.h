#pragma once
// Candidate selection with tensor ops, on whatever device the log-probabilities are: the same candidates in the
// same total order as best_candidates' scan (beam_candidates.h), without copying the [rows, V] log-probabilities
// to the host. On a GPU this replaces a copy of every row per step with one copy of the [sentences, count]
// result; on the CPU the scan stays faster (it reads each log-probability once), so beam search uses this only
// off the CPU, or when SearchOptions::device_candidates forces it (tests).
#include <cstdint>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "decode/beam_candidates.h"

namespace parla::decode {

// logp: [A * beam, V] on any device; row_score: float [A * beam] on the same device (-inf for dead rows).
// Returns {scores float [A, count], indices int64 [A, count]} on that device, each row ordered by score
// descending, then index (beam * V + token) ascending; a sentence with fewer than `count` candidates fills its
// tail with score -inf (index unspecified). -inf and NaN totals are never candidates.
std::pair<torch::Tensor, torch::Tensor> select_candidates(const torch::Tensor& logp, const torch::Tensor& row_score,
                                                          int64_t beam, int64_t count);

// select_candidates with its small result copied to the host in one transfer, in best_candidates' shape.
std::vector<std::vector<Candidate>> best_candidates_tensor(const torch::Tensor& logp, const torch::Tensor& row_score,
                                                           int64_t beam, int64_t count);

}  // namespace parla::decode

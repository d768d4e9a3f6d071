#pragma once
// Token-budget batching with length bucketing (fairseq's batch_by_size, Marian's maxi-batches): sentences of
// similar length share a batch so that little of the budget is spent on padding, and the number of sentences per
// batch adapts to their length so that every batch costs about the same memory and time.
#include <cstdint>
#include <vector>

namespace parla::data {

// Which pairs of a split take part in training, and their lengths in tokens including the </s> that batching
// appends (source) or the <s>/</s> shift (target: len + 1).
struct LengthTable {
  std::vector<int64_t> ids;      // dataset indices of the pairs kept
  std::vector<int32_t> src_len;  // per kept pair
  std::vector<int32_t> tgt_len;  // per kept pair (0 for monolingual tasks)
  int64_t dropped = 0;           // pairs skipped by the length filter
};

// Keeps the pairs whose both sides (after adding </s>) have at most max_len tokens. src_lengths/tgt_lengths are
// the stored lengths (no </s>); tgt_lengths may be empty for monolingual data.
LengthTable filter_by_length(const std::vector<int32_t>& src_lengths, const std::vector<int32_t>& tgt_lengths,
                             int64_t max_len);

// The table with every length rounded up to a multiple of `multiple` (data.pad_to_multiple; 1 = unchanged):
// batching then sorts and costs sentences by the lengths their batch will have.
LengthTable padded_lengths(LengthTable table, int64_t multiple);

// One epoch's batches as lists of dataset indices.
using BatchPlan = std::vector<std::vector<int64_t>>;

// The batches of epoch `epoch` (1-based) for `seed`: pairs are shuffled, stably sorted by (target, source)
// length so that equal lengths stay in random order, cut greedily so that
// sentences x (max source + max target length) <= batch_tokens, and the batch order is shuffled. Deterministic
// in (seed, epoch); a pair longer than the whole budget gets a batch of its own.
BatchPlan plan_epoch(const LengthTable& table, int64_t batch_tokens, uint64_t seed, int64_t epoch);

}  // namespace parla::data

#pragma once
// A padded mini-batch as the models take it. Translation (teacher forcing, Vaswani et al. 2017 section 3):
// the source gets </s> appended, the decoder reads tgt_in = <s> y and is trained to predict tgt_out = y </s>.
// BERT batches use `src` for the tokens and fill segments and the MLM/NSP labels.
#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "data/token_dataset.h"

namespace parla::data {

struct Batch {
  torch::Tensor src;         // int64 [B, S], kPadId-padded
  torch::Tensor tgt_in;      // int64 [B, T]
  torch::Tensor tgt_out;     // int64 [B, T]
  torch::Tensor segments;    // BERT: int64 [B, S] segment ids
  torch::Tensor mlm_labels;  // BERT: int64 [B, S], kIgnoreIndex where not predicted
  torch::Tensor nsp_labels;  // BERT: int64 [B], 1 = B follows A
  int64_t sentences = 0;
  int64_t src_tokens = 0;    // non-pad source tokens (with </s>)
  int64_t tgt_tokens = 0;    // non-pad target tokens (= tokens predicted)

  Batch to(const torch::Device& device) const;
};

// Collates the pairs `ids` of a parallel split; tgt_in starts with `start_id` (the model's start token,
// Seq2SeqModel::start_id). Throws DataError naming the dataset when an id is out of range.
// `pad_to_multiple` > 1: both sides' widths rounded up to a multiple of it with padding (data.pad_to_multiple).
Batch collate_parallel(const ParallelSplit& split, const std::vector<int64_t>& ids, int64_t start_id,
                       int64_t pad_to_multiple = 1);

// Source sentences only (for decoding): int64 [B, S] with </s> appended, kPadId-padded.
torch::Tensor collate_source(const TokenDataset& src, const std::vector<int64_t>& ids, int64_t pad_to_multiple = 1);

}  // namespace parla::data

#pragma once
// Greedy search: the most probable token at every step, for a whole batch at once; sentences leave the batch
// (and the decoder state) as soon as they emit EOS. Equals beam search with beam size 1. Without scores
// (SearchOptions::scores false) the tokens come from the logits (decode/greedy_choice.h), the same ones.
#include <vector>

#include <torch/types.h>

#include "decode/hypothesis.h"
#include "decode/search_options.h"
#include "models/seq2seq.h"

namespace parla::decode {

// src: int64 [B, S] (PAD-padded, each row ends with EOS). Returns one single-hypothesis list per row.
std::vector<NBestList> greedy_search(models::Seq2SeqModel& model, const torch::Tensor& src, const SearchOptions& o);

}  // namespace parla::decode

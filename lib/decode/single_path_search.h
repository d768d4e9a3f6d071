#pragma once
// The loop shared by the searches that follow one path per sentence (greedy search, sampling): step the whole
// batch, let a chooser pick one token per live row, and remove sentences from the batch (and the decoder state)
// as soon as they emit EOS.
#include <functional>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "decode/hypothesis.h"
#include "decode/search_options.h"
#include "models/seq2seq.h"

namespace parla::decode {

// Given the constrained log-probabilities [N, V] of the live rows, returns {tokens int64 [N], their log-probs
// float [N]}, both on logp's device: the search brings them to the host in one transfer per step.
using TokenChooser = std::function<std::pair<torch::Tensor, torch::Tensor>(const torch::Tensor& logp)>;

// Given a step's logits [N, V] (float, CPU, contiguous), the number of tokens each row has so far and the rows'
// length limits: the tokens (int64 [N], CPU) that `choose` would pick from the constrained log-probabilities.
using LogitsChooser = std::function<torch::Tensor(const torch::Tensor& logits, int64_t step,
                                                  const std::vector<int64_t>& max_len)>;

// With `from_logits`, where the model offers logits (Seq2SeqModel::has_step_logits), on the CPU, without scores
// (SearchOptions::scores false), alignments or a shortlist, tokens come from it instead and every score is NaN.
std::vector<NBestList> single_path_search(models::Seq2SeqModel& model, const torch::Tensor& src,
                                          const SearchOptions& o, const TokenChooser& choose,
                                          const LogitsChooser& from_logits = nullptr);

}  // namespace parla::decode

#pragma once
// What every search applies to a decoder step's log-probabilities before choosing tokens: PAD and the start token
// (BOS, or PAD for models that start from it) are never output, EOS is forbidden before the minimum length and
// forced at the maximum length; a target prefix is forced first.
#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace parla::decode {

// Real source tokens per row of src [B, S] (non-PAD, without the final EOS).
std::vector<int64_t> source_lengths(const torch::Tensor& src);

// logp [N, V] (modified in place) of hypotheses that have `step` tokens so far; `max_len[r]` is row r's limit;
// `start_id` the model's start token (Seq2SeqModel::start_id); `prefix` the tokens every output starts with
// (SearchOptions::target_prefix): at step t < its size a row below its limit has prefix[t] forced, scored 0.
void constrain_step(torch::Tensor& logp, int64_t step, const std::vector<int64_t>& max_len, int64_t min_length,
                    int64_t start_id, const std::vector<int64_t>& prefix = {});
// The same when rows are at different steps (continuous batching): row r has `steps[r]` tokens so far.
void constrain_step(torch::Tensor& logp, const std::vector<int64_t>& steps, const std::vector<int64_t>& max_len,
                    int64_t min_length, int64_t start_id, const std::vector<int64_t>& prefix = {});

// Row r of a step's attention [N, S] as floats, first `width` entries (the row's real source plus EOS).
std::vector<float> attention_row(const torch::Tensor& attention, int64_t r, int64_t width);

}  // namespace parla::decode

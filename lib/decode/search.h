#pragma once
// The one entry point the translator and validation call: sampling when asked, greedy search when the beam is
// 1 and one hypothesis is wanted, beam search otherwise.
#include <vector>

#include <ATen/core/Generator.h>
#include <torch/types.h>

#include "decode/hypothesis.h"
#include "decode/search_options.h"
#include "models/seq2seq.h"

namespace parla::decode {

// `generator` is used only when sampling (may be null otherwise).
std::vector<NBestList> search(models::Seq2SeqModel& model, const torch::Tensor& src, const SearchOptions& o,
                              at::Generator* generator = nullptr);

}  // namespace parla::decode

#pragma once
// Sampling search for back-translation (Edunov et al. 2018, "Understanding Back-Translation at Scale"): each
// token is drawn from the model's distribution, sharpened or flattened by a temperature and optionally
// restricted to the k most likely tokens (top-k sampling, Fan et al. 2018). Batched like greedy search.
#include <vector>

#include <ATen/core/Generator.h>
#include <torch/types.h>

#include "decode/hypothesis.h"
#include "decode/search_options.h"
#include "models/seq2seq.h"

namespace parla::decode {

// One sampled hypothesis per row; its score is the model's (untempered) log-probability, length-normalised.
std::vector<NBestList> sample(models::Seq2SeqModel& model, const torch::Tensor& src, const SearchOptions& o,
                              at::Generator& generator);

// A generator on `device` (the model's) seeded with `seed` (runtime.seed), so sampled translations are
// reproducible. Draws happen where the generator lives: the CPU gives the same samples as it always did.
at::Generator make_generator(uint64_t seed, const c10::Device& device = c10::Device(c10::DeviceType::CPU));

}  // namespace parla::decode

#pragma once
// What bench_translate and bench_int8 time: token-id sentences decoded in length-sorted batches of `batch`
// sentences (maxi-batch 20) with decode::search, as parla-translate batches them.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "decode/maxi_batch.h"
#include "decode/search.h"
#include "models/seq2seq.h"

namespace parla::bench {

struct SearchRate {
  double sentences_per_s, tokens_per_s;  // tokens: the best hypothesis's, plus its EOS
};

inline SearchRate batched_search(models::Seq2SeqModel& model, const std::vector<std::vector<int64_t>>& sents,
                                 const decode::SearchOptions& options, size_t batch) {
  std::vector<size_t> lengths;
  for (auto& s : sents) lengths.push_back(s.size());
  auto plan = decode::plan_batches(lengths, decode::BatchLimits{batch, 0, 20});
  uint64_t tokens = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (auto& b : plan) {
    size_t width = 0;
    for (size_t i : b) width = std::max(width, sents[i].size() + 1);
    auto src = torch::zeros({static_cast<int64_t>(b.size()), static_cast<int64_t>(width)}, torch::kLong);
    for (size_t r = 0; r < b.size(); ++r) {
      for (size_t j = 0; j < sents[b[r]].size(); ++j) src[r][j] = sents[b[r]][j];
      src[r][sents[b[r]].size()] = parla::kEosId;
    }
    for (auto& list : decode::search(model, src, options)) tokens += list.empty() ? 0 : list[0].tokens.size() + 1;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {static_cast<double>(sents.size()) / secs, static_cast<double>(tokens) / secs};
}

}  // namespace parla::bench

#include "decode/maxi_batch.h"

#include <algorithm>
#include <numeric>

namespace parla::decode {

size_t window_sentences(const BatchLimits& limits) {
  size_t per_batch = limits.batch_tokens > 0 ? std::max<size_t>(1, limits.batch_tokens / 8) : limits.batch_size;
  return std::max<size_t>(1, per_batch) * std::max<size_t>(1, limits.maxi_batch);
}

size_t batch_token_budget(const BatchLimits& limits) {
  return limits.batch_tokens > 0 ? limits.batch_tokens
                                 : std::max<size_t>(1, limits.batch_size) * kSentenceBatchTokensPerSentence;
}

std::vector<std::vector<size_t>> plan_batches(const std::vector<size_t>& lengths, const BatchLimits& limits) {
  std::vector<size_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return lengths[a] > lengths[b]; });

  std::vector<std::vector<size_t>> batches;
  std::vector<size_t> cur;
  size_t cur_max = 0;
  const size_t max_sentences = std::max<size_t>(1, limits.batch_size);
  const size_t max_tokens = batch_token_budget(limits);
  for (size_t i : order) {
    // +1 for the EOS every source carries; longest first, so the first sentence of a batch sets its width.
    size_t width = std::max(cur_max, lengths[i] + 1);
    const bool full = (limits.batch_tokens == 0 && cur.size() >= max_sentences) ||
                      (!cur.empty() && width * (cur.size() + 1) > max_tokens);
    if (full) {
      batches.push_back(std::move(cur));
      cur.clear();
      cur_max = 0;
      width = lengths[i] + 1;
    }
    cur.push_back(i);
    cur_max = width;
  }
  if (!cur.empty()) batches.push_back(std::move(cur));
  return batches;
}

}  // namespace parla::decode

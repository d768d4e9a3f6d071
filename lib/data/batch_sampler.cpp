#include "data/batch_sampler.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace parla::data {

namespace {

// Fisher-Yates with our own index draws, so the order is the same with every standard library.
template <class T>
void shuffle(std::vector<T>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    size_t j = static_cast<size_t>(rng() % i);
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace

LengthTable filter_by_length(const std::vector<int32_t>& src_lengths, const std::vector<int32_t>& tgt_lengths,
                             int64_t max_len) {
  LengthTable t;
  bool has_tgt = !tgt_lengths.empty();
  for (size_t i = 0; i < src_lengths.size(); ++i) {
    int32_t s = src_lengths[i] + 1;
    int32_t g = has_tgt ? tgt_lengths[i] + 1 : 0;
    if (s > max_len || g > max_len) {
      ++t.dropped;
      continue;
    }
    t.ids.push_back(static_cast<int64_t>(i));
    t.src_len.push_back(s);
    t.tgt_len.push_back(g);
  }
  return t;
}

LengthTable padded_lengths(LengthTable table, int64_t multiple) {
  if (multiple <= 1) return table;
  auto up = [multiple](int32_t n) { return static_cast<int32_t>((n + multiple - 1) / multiple * multiple); };
  for (auto& n : table.src_len) n = up(n);
  for (auto& n : table.tgt_len) n = up(n);
  return table;
}

BatchPlan plan_epoch(const LengthTable& table, int64_t batch_tokens, uint64_t seed, int64_t epoch) {
  // One stream per (seed, epoch): a resumed run rebuilds the same plan from the epoch number alone.
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(epoch),
                    0x9e3779b9u};
  std::mt19937_64 rng(seq);
  std::vector<size_t> order(table.ids.size());
  std::iota(order.begin(), order.end(), 0);
  shuffle(order, rng);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (table.tgt_len[a] != table.tgt_len[b]) return table.tgt_len[a] < table.tgt_len[b];
    return table.src_len[a] < table.src_len[b];
  });

  BatchPlan plan;
  std::vector<int64_t> cur;
  int64_t max_s = 0, max_t = 0;
  for (size_t pos : order) {
    int64_t s = std::max<int64_t>(max_s, table.src_len[pos]);
    int64_t t = std::max<int64_t>(max_t, table.tgt_len[pos]);
    if (!cur.empty() && static_cast<int64_t>(cur.size() + 1) * (s + t) > batch_tokens) {
      plan.push_back(std::move(cur));
      cur.clear();
      s = table.src_len[pos];
      t = table.tgt_len[pos];
    }
    cur.push_back(table.ids[pos]);
    max_s = s;
    max_t = t;
  }
  if (!cur.empty()) plan.push_back(std::move(cur));
  shuffle(plan, rng);
  return plan;
}

}  // namespace parla::data

#pragma once
// A deterministic toy Seq2SeqModel for search tests: the next-token log-probabilities are a fixed pseudo-random
// function of (source tokens, target prefix), computed independently for every row, so any search result can be
// checked against brute-force enumeration with `toy_log_probs`. The state keeps what a real decoder keeps
// (per-row source and prefix) and checks that the search reorders it consistently.
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include <torch/torch.h>

#include "models/seq2seq.h"

namespace parla::decode::testing {

// Source ids of row r of src without padding (EOS included).
inline std::vector<int64_t> row_tokens(const torch::Tensor& src, int64_t r) {
  std::vector<int64_t> out;
  auto row = src[r].contiguous();
  for (int64_t i = 0; i < row.numel(); ++i)
    if (row[i].item<int64_t>() != parla::kPadId) out.push_back(row[i].item<int64_t>());
  return out;
}

inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}

// log-softmax over `vocab` of pseudo-random logits in [-2, 2] seeded by (seed, source, prefix), computed in
// double; `eos_bias` raises EOS with the prefix length so that outputs end.
inline std::vector<double> toy_log_probs(const std::vector<int64_t>& source, const std::vector<int64_t>& prefix,
                                         int64_t vocab, uint64_t seed, double eos_bias) {
  uint64_t h = seed;
  for (auto t : source) h = mix(h, static_cast<uint64_t>(t) + 17);
  h = mix(h, 0xabcdef);
  for (auto t : prefix) h = mix(h, static_cast<uint64_t>(t) + 101);
  std::vector<double> logits(vocab);
  for (int64_t v = 0; v < vocab; ++v) {
    uint64_t x = mix(h, static_cast<uint64_t>(v) + 7);
    logits[v] = 4.0 * (static_cast<double>(x % 1000003) / 1000003.0) - 2.0;
  }
  logits[parla::kEosId] += eos_bias * static_cast<double>(prefix.size());
  double mx = logits[0];
  for (double l : logits) mx = std::max(mx, l);
  double z = 0;
  for (double l : logits) z += std::exp(l - mx);
  for (auto& l : logits) l = l - mx - std::log(z);
  return logits;
}

class ToyState : public models::DecoderState {
 public:
  std::vector<std::vector<int64_t>> source, prefix;
  int64_t steps_ = 0;
  void reorder(const torch::Tensor& indices) override {
    auto idx = indices.to(torch::kCPU).contiguous();
    std::vector<std::vector<int64_t>> s, p;
    for (int64_t i = 0; i < idx.numel(); ++i) {
      int64_t r = idx[i].item<int64_t>();
      s.push_back(source.at(r));
      p.push_back(prefix.at(r));
    }
    source = std::move(s);
    prefix = std::move(p);
  }
  // Joining is supported before the first step only (the toy keeps no per-row step count).
  bool append(models::DecoderState& base) override {
    auto* other = dynamic_cast<ToyState*>(&base);
    if (!other || steps_ != 0 || other->steps_ != 0) return false;
    source.insert(source.end(), other->source.begin(), other->source.end());
    prefix.insert(prefix.end(), other->prefix.begin(), other->prefix.end());
    return true;
  }
  int64_t steps() const override { return steps_; }
};

class ToyModel : public models::Seq2SeqModel {
 public:
  ToyModel(int64_t vocab, uint64_t seed, double eos_bias = 0.5, int64_t max_pos = INT64_MAX)
      : vocab_(vocab), seed_(seed), eos_bias_(eos_bias), max_pos_(max_pos) {}

  std::unique_ptr<models::DecoderState> start(const torch::Tensor& src) override {
    auto s = std::make_unique<ToyState>();
    for (int64_t r = 0; r < src.size(0); ++r) {
      s->source.push_back(row_tokens(src, r));
      s->prefix.emplace_back();
    }
    ++starts;
    return s;
  }

  torch::Tensor step(const torch::Tensor& prev, models::DecoderState& state, torch::Tensor* attention) override {
    auto& s = static_cast<ToyState&>(state);
    const int64_t n = prev.size(0);
    if (n != static_cast<int64_t>(s.prefix.size())) throw std::runtime_error("toy: state and prev rows differ");
    auto out = torch::empty({n, vocab_}, torch::kFloat);
    int64_t width = 0;
    for (auto& src : s.source) width = std::max<int64_t>(width, src.size());
    if (attention) *attention = torch::zeros({n, width}, torch::kFloat);
    for (int64_t r = 0; r < n; ++r) {
      int64_t p = prev[r].item<int64_t>();
      if (s.steps_ > 0) s.prefix[r].push_back(p);
      auto lp = toy_log_probs(s.source[r], s.prefix[r], vocab_, seed_, eos_bias_);
      for (int64_t v = 0; v < vocab_; ++v) out[r][v] = static_cast<float>(lp[v]);
      if (attention) {
        // Attends to source position (prefix length mod source length): a known alignment.
        int64_t len = static_cast<int64_t>(s.source[r].size());
        (*attention)[r][static_cast<int64_t>(s.prefix[r].size()) % len] = 1.0f;
      }
    }
    ++s.steps_;
    rows_stepped += n;
    return out;
  }

  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt_in) override {
    auto out = torch::empty({src.size(0), tgt_in.size(1), vocab_});
    for (int64_t r = 0; r < src.size(0); ++r) {
      auto source = row_tokens(src, r);
      std::vector<int64_t> prefix;
      for (int64_t t = 0; t < tgt_in.size(1); ++t) {
        if (t > 0) prefix.push_back(tgt_in[r][t].item<int64_t>());
        auto lp = toy_log_probs(source, prefix, vocab_, seed_, eos_bias_);
        for (int64_t v = 0; v < vocab_; ++v) out[r][t][v] = static_cast<float>(lp[v]);
      }
    }
    return out;
  }

  int64_t vocab_size() const override { return vocab_; }
  int64_t max_positions() const override { return max_pos_; }

  int64_t starts = 0, rows_stepped = 0;

 private:
  int64_t vocab_;
  uint64_t seed_;
  double eos_bias_;
  int64_t max_pos_;
};

// A batch [B, S] from token lists (EOS appended, PAD-padded).
inline torch::Tensor make_source(const std::vector<std::vector<int64_t>>& rows) {
  size_t width = 1;
  for (auto& r : rows) width = std::max(width, r.size() + 1);
  auto src = torch::full({static_cast<int64_t>(rows.size()), static_cast<int64_t>(width)}, parla::kPadId,
                         torch::kLong);
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < rows[i].size(); ++j) src[i][j] = rows[i][j];
    src[i][rows[i].size()] = parla::kEosId;
  }
  return src;
}

// n random sources of 1..max_length real tokens (ids 4..vocab-1), reproducible from `seed`.
inline std::vector<std::vector<int64_t>> random_sources(int n, int64_t vocab, unsigned seed, int max_length = 12) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int64_t>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> s(1 + rng() % static_cast<unsigned>(max_length));
    for (auto& t : s) t = 4 + static_cast<int64_t>(rng() % static_cast<unsigned>(vocab - 4));
    out.push_back(s);
  }
  return out;
}

}  // namespace parla::decode::testing

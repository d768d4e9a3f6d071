// Position-based sparse attention (seed 002, fig. 4; BigBird, Sparse Transformer, Longformer) against brute-force
// enumerations written from each pattern's definition and a dense masked softmax over all pairs in double precision.
// Plain assertions use REQUIRE: glog (included by LibTorch after catch.hpp) redefines CHECK as its fatal check.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/error.h"
#include "nn/sparse_attention.h"
#include "support/tensors.h"

namespace parla_test_sparse {

using parla::nn::SparsePattern;
using parla::testing::max_abs_diff;

// ---- brute-force references, from the definitions (not from the implementation's block plan) ----

// Whether query i may attend to key j in a sequence of real length L. The random draw is the one thing the
// definition takes as given: "J is one of random_key_blocks(I)" (its own properties are tested separately).
struct BruteForce {
  const SparsePattern& p;
  bool causal;
  int64_t L;
  std::map<int64_t, std::vector<int64_t>> random;  // per query block

  bool allowed(int64_t i, int64_t j) {
    if (i < 0 || j < 0 || i >= L || j >= L) return false;
    if (causal && j > i) return false;
    bool a = false;
    if (p.band && std::llabs(i - j) <= p.window) a = true;
    if (p.global && (i < p.global_tokens || j < p.global_tokens)) a = true;
    if (p.dilated)
      for (int64_t k = -p.dilated_window; k <= p.dilated_window; ++k)
        if (j == i + k * p.dilation) a = true;
    if (p.block_local && i / p.block_size == j / p.block_size) a = true;
    if (p.random) {
      const int64_t I = i / p.block_size;
      if (!random.count(I)) random[I] = parla::nn::random_key_blocks(p, I, L, causal);
      const auto& r = random[I];
      if (std::find(r.begin(), r.end(), j / p.block_size) != r.end()) a = true;
    }
    return a;
  }
};

// [T, T] bool: the pattern of a sequence of real length L (<= T) inside a padded length T.
torch::Tensor brute_mask(int64_t T, int64_t L, const SparsePattern& p, bool causal) {
  BruteForce bf{p, causal, L, {}};
  auto m = torch::zeros({T, T}, torch::kBool);
  auto a = m.accessor<bool, 2>();
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) a[i][j] = bf.allowed(i, j);
  return m;
}

// Dense masked softmax attention in double over all pairs: rows without an allowed key get zero weights.
torch::Tensor dense_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const std::vector<int64_t>& lengths, const SparsePattern& p, bool causal,
                              torch::Tensor* weights = nullptr) {
  const int64_t B = q.size(0), T = q.size(2);
  std::vector<torch::Tensor> masks;
  for (int64_t b = 0; b < B; ++b) masks.push_back(brute_mask(T, lengths[b], p, causal));
  auto mask = torch::stack(masks).unsqueeze(1);  // [B, 1, T, T]
  auto s = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(3)));
  auto sm = s.masked_fill(mask.logical_not(), -1e300);
  auto m = std::get<0>(sm.max(-1, true)).detach();
  auto e = (sm - m).exp() * mask.to(torch::kDouble);
  auto w = e / e.sum(-1, true).clamp_min(1e-300);
  if (weights) *weights = w;
  return torch::matmul(w, v);
}

torch::Tensor key_valid_of(const std::vector<int64_t>& lengths, int64_t T) {
  auto kv = torch::zeros({static_cast<int64_t>(lengths.size()), T}, torch::kBool);
  for (size_t b = 0; b < lengths.size(); ++b) kv[b].narrow(0, 0, lengths[b]).fill_(true);
  return kv;
}

SparsePattern big_bird(int64_t b) {
  SparsePattern p;
  p.block_size = b;
  p.band = true;
  p.window = 3;
  p.global = true;
  p.global_tokens = 2;
  p.random = true;
  p.random_blocks = 2;
  p.seed = 5;
  return p;
}

SparsePattern dilated(int64_t b) {
  SparsePattern p;
  p.block_size = b;
  p.dilated = true;
  p.dilation = 3;
  p.dilated_window = 2;
  return p;
}

SparsePattern block_local(int64_t b) {
  SparsePattern p;
  p.block_size = b;
  p.block_local = true;
  return p;
}

// Sparse Transformer's strided pattern (Child et al. 2019): the own block plus every b-th position.
SparsePattern strided(int64_t b) {
  SparsePattern p;
  p.block_size = b;
  p.block_local = true;
  p.dilated = true;
  p.dilation = b;
  p.dilated_window = 100;
  return p;
}

SparsePattern everything(int64_t b) {
  SparsePattern p = big_bird(b);
  p.dilated = true;
  p.dilation = 5;
  p.dilated_window = 3;
  p.block_local = true;
  return p;
}

// The atomic patterns, each alone, with several sizes.
std::vector<SparsePattern> atomic_patterns(int64_t b) {
  std::vector<SparsePattern> out;
  for (int64_t w : {1, 3, 100}) {
    SparsePattern p;
    p.block_size = b;
    p.band = true;
    p.window = w;
    out.push_back(p);
  }
  for (int64_t g : {1, 3}) {
    SparsePattern p;
    p.block_size = b;
    p.global = true;
    p.global_tokens = g;
    out.push_back(p);
  }
  for (auto [d, w] : std::vector<std::pair<int64_t, int64_t>>{{1, 2}, {3, 2}, {5, 4}, {20, 1}}) {
    SparsePattern p;
    p.block_size = b;
    p.dilated = true;
    p.dilation = d;
    p.dilated_window = w;
    out.push_back(p);
  }
  for (auto [r, seed] : std::vector<std::pair<int64_t, uint64_t>>{{1, 1}, {2, 7}, {50, 3}}) {
    SparsePattern p;
    p.block_size = b;
    p.random = true;
    p.random_blocks = r;
    p.seed = seed;
    out.push_back(p);
  }
  out.push_back(block_local(b));
  return out;
}

std::string config_error(const SparsePattern& p) {
  try {
    parla::nn::validate(p);
  } catch (const parla::ConfigError& e) {
    return e.what();
  }
  return "";
}

struct Qkv {
  torch::Tensor q, k, v;
};

Qkv random_qkv(int64_t B, int64_t H, int64_t T, int64_t Dh, uint64_t seed) {
  torch::manual_seed(seed);
  auto o = torch::kDouble;
  return {torch::randn({B, H, T, Dh}, o), torch::randn({B, H, T, Dh}, o), torch::randn({B, H, T, Dh}, o)};
}

// ---- tests ----

TEST_CASE("each atomic sparse pattern's mask allows exactly the pairs of its definition") {
  for (int64_t b : {1, 4, 7, 16})
    for (const auto& p : atomic_patterns(b))
      for (int64_t T : {1, 5, 16, 37, 70})
        for (bool causal : {false, true}) {
          INFO("block " << b << " T " << T << " causal " << causal << " band " << p.band << " global " << p.global
                        << " dilated " << p.dilated << " random " << p.random << " block_local " << p.block_local);
          REQUIRE(torch::equal(parla::nn::sparse_pattern_mask(T, p, causal), brute_mask(T, T, p, causal)));
        }
}

TEST_CASE("a union of sparse patterns allows exactly the pairs that any of them allows") {
  for (int64_t b : {3, 8})
    for (const auto& p : {big_bird(b), strided(b), everything(b)})
      for (int64_t T : {9, 40})
        for (bool causal : {false, true}) {
          INFO("block " << b << " T " << T << " causal " << causal);
          REQUIRE(torch::equal(parla::nn::sparse_pattern_mask(T, p, causal), brute_mask(T, T, p, causal)));
        }
}

TEST_CASE("random key blocks are deterministic, distinct, within the candidates and fixed by seed, block and length") {
  SparsePattern p;
  p.random = true;
  p.block_size = 4;
  p.random_blocks = 3;
  p.seed = 11;
  for (bool causal : {false, true})
    for (int64_t L : {1, 4, 5, 13, 40, 400})
      for (int64_t I = 0; I < (L + 3) / 4; ++I) {
        const int64_t n = causal ? I + 1 : (L + 3) / 4;
        auto r = parla::nn::random_key_blocks(p, I, L, causal);
        REQUIRE(r == parla::nn::random_key_blocks(p, I, L, causal));
        REQUIRE(static_cast<int64_t>(r.size()) == std::min<int64_t>(3, n));
        for (size_t s = 0; s < r.size(); ++s) {
          REQUIRE(r[s] >= 0);
          REQUIRE(r[s] < n);
          if (s > 0) REQUIRE(r[s] != r[s - 1]);
        }
        std::vector<int64_t> sorted = r;
        std::sort(sorted.begin(), sorted.end());
        REQUIRE(std::unique(sorted.begin(), sorted.end()) == sorted.end());
      }
  // Causal: independent of the sequence length (incremental decoding equals the full pass).
  for (int64_t I = 0; I < 30; ++I)
    REQUIRE(parla::nn::random_key_blocks(p, I, 4 * I + 1, true) == parla::nn::random_key_blocks(p, I, 1000, true));
  // Non-causal: depends on the real length only through its number of blocks.
  for (int64_t I = 0; I < 10; ++I) {
    REQUIRE(parla::nn::random_key_blocks(p, I, 37, false) == parla::nn::random_key_blocks(p, I, 40, false));
    REQUIRE(parla::nn::random_key_blocks(p, I, 37, false) == parla::nn::random_key_blocks(p, I, 38, false));
  }
  // All candidates when r >= their number.
  p.random_blocks = 50;
  REQUIRE(parla::nn::random_key_blocks(p, 4, 0, true) == std::vector<int64_t>{0, 1, 2, 3, 4});
  REQUIRE(parla::nn::random_key_blocks(p, 9, 12, false) == std::vector<int64_t>{0, 1, 2});
  // Other seeds and other query blocks draw other blocks.
  p.random_blocks = 3;
  SparsePattern other = p;
  other.seed = 12;
  int differ_seed = 0, differ_block = 0;
  for (int64_t I = 0; I < 20; ++I) {
    differ_seed += parla::nn::random_key_blocks(p, I, 256, false) != parla::nn::random_key_blocks(other, I, 256, false);
    differ_block +=
        parla::nn::random_key_blocks(p, I, 256, false) != parla::nn::random_key_blocks(p, I + 1, 256, false);
  }
  REQUIRE(differ_seed >= 15);
  REQUIRE(differ_block >= 15);
  // Roughly uniform over the candidates: 8 blocks, one draw each for 1600 query blocks, expected 200 each.
  p.random_blocks = 1;
  std::vector<int> count(8, 0);
  for (int64_t I = 0; I < 1600; ++I) count[parla::nn::random_key_blocks(p, I, 32, false).at(0)] += 1;
  for (int c : count) {
    REQUIRE(c > 140);
    REQUIRE(c < 260);
  }
}

TEST_CASE("sparse attention equals a dense masked softmax over all pairs with padding, causal and not") {
  const int64_t T = 37;
  const std::vector<int64_t> lengths{37, 20, 9};
  auto x = random_qkv(3, 2, T, 4, 1);
  auto kv = key_valid_of(lengths, T);
  for (int64_t b : {4, 8})
    for (const auto& p : {big_bird(b), dilated(b), block_local(b), strided(b), everything(b)})
      for (bool causal : {false, true}) {
        INFO("block " << b << " causal " << causal << " band " << p.band << " dilated " << p.dilated
                      << " block_local " << p.block_local);
        torch::Tensor w, w_ref;
        auto out = parla::nn::sparse_attention(x.q, x.k, x.v, kv, p, causal, 0.0, false, &w);
        auto ref = dense_reference(x.q, x.k, x.v, lengths, p, causal, &w_ref);
        REQUIRE(max_abs_diff(out, ref) < 1e-12);
        REQUIRE(max_abs_diff(w, w_ref) < 1e-12);
        // Without key_valid every row has the full length.
        auto out_full = parla::nn::sparse_attention(x.q, x.k, x.v, {}, p, causal);
        REQUIRE(max_abs_diff(out_full, dense_reference(x.q, x.k, x.v, {T, T, T}, p, causal)) < 1e-12);
      }
}

TEST_CASE("a sparse pattern that covers every pair equals full attention") {
  const int64_t T = 23;
  auto x = random_qkv(2, 3, T, 5, 2);
  SparsePattern p;
  p.band = true;
  p.window = T;
  p.block_size = 6;
  for (bool causal : {false, true}) {
    auto s = torch::matmul(x.q, x.k.transpose(-2, -1)) / std::sqrt(5.0);
    if (causal) s = s.masked_fill(torch::ones({T, T}, torch::kBool).triu(1), -INFINITY);
    auto full = torch::matmul(torch::softmax(s, -1), x.v);
    REQUIRE(max_abs_diff(parla::nn::sparse_attention(x.q, x.k, x.v, {}, p, causal), full) < 1e-12);
  }
  // The same with every row's real keys only: the real query rows equal full attention over the real keys.
  const std::vector<int64_t> lengths{T, 11};
  auto out = parla::nn::sparse_attention(x.q, x.k, x.v, key_valid_of(lengths, T), p, false);
  for (int64_t b = 0; b < 2; ++b) {
    const int64_t L = lengths[b];
    auto q = x.q[b].narrow(1, 0, L), k = x.k[b].narrow(1, 0, L), v = x.v[b].narrow(1, 0, L);
    auto full = torch::matmul(torch::softmax(torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(5.0), -1), v);
    REQUIRE(max_abs_diff(out[b].narrow(1, 0, L), full) < 1e-12);
    if (L < T) REQUIRE(out[b].narrow(1, L, T - L).abs().max().item<double>() == 0.0);
  }
}

TEST_CASE("gradients of sparse attention with respect to q, k and v equal those of the dense reference") {
  const int64_t T = 29;
  const std::vector<int64_t> lengths{29, 14};
  auto kv = key_valid_of(lengths, T);
  for (const auto& p : {big_bird(4), everything(5)})
    for (bool causal : {false, true}) {
      INFO("causal " << causal);
      auto x = random_qkv(2, 2, T, 3, 3);
      auto r = torch::randn({2, 2, T, 3}, torch::kDouble);
      std::vector<torch::Tensor> grads[2];
      for (int which = 0; which < 2; ++which) {
        auto q = x.q.clone().requires_grad_(true), k = x.k.clone().requires_grad_(true),
             v = x.v.clone().requires_grad_(true);
        auto out = which == 0 ? parla::nn::sparse_attention(q, k, v, kv, p, causal)
                              : dense_reference(q, k, v, lengths, p, causal);
        (out * r).sum().backward();
        grads[which] = {q.grad(), k.grad(), v.grad()};
      }
      for (int n = 0; n < 3; ++n) REQUIRE(max_abs_diff(grads[0][n], grads[1][n]) < 1e-11);
    }
}

TEST_CASE("sparse attention of one unpadded sentence equals its row in a padded batch") {
  const int64_t T = 45;
  const std::vector<int64_t> lengths{12, 45, 30, 3};  // different numbers of blocks: other random draws per row
  auto x = random_qkv(4, 2, T, 4, 4);
  auto kv = key_valid_of(lengths, T);
  for (const auto& p : {big_bird(8), everything(6)})
    for (bool causal : {false, true}) {
      INFO("causal " << causal);
      auto batch = parla::nn::sparse_attention(x.q, x.k, x.v, kv, p, causal);
      for (int64_t b = 0; b < 4; ++b) {
        const int64_t L = lengths[b];
        auto one = [&](const torch::Tensor& t) { return t.narrow(0, b, 1).narrow(2, 0, L); };
        auto single = parla::nn::sparse_attention(one(x.q), one(x.k), one(x.v), {}, p, causal);
        REQUIRE(max_abs_diff(single, one(batch)) < 1e-12);
        if (L < T) REQUIRE(batch.narrow(0, b, 1).narrow(2, L, T - L).abs().max().item<double>() == 0.0);
      }
    }
}

TEST_CASE("the number of pairs sparse attention computes grows linearly with the length") {
  SparsePattern p = big_bird(32);
  p.window = 16;
  p.random_blocks = 3;
  for (bool causal : {false, true}) {
    const int64_t a = parla::nn::sparse_computed_pairs(4096, p, causal);
    const int64_t b = parla::nn::sparse_computed_pairs(8192, p, causal);
    REQUIRE(b <= 2.2 * a);
    REQUIRE(a < 4096LL * 4096 / 8);
  }
  // It evaluates at least every allowed pair.
  for (int64_t T : {10, 64, 100})
    for (const auto& q : {big_bird(8), strided(8), everything(4)})
      for (bool causal : {false, true})
        REQUIRE(parla::nn::sparse_computed_pairs(T, q, causal) >= brute_mask(T, T, q, causal).sum().item<int64_t>());
}

TEST_CASE("a sparse pattern row for incremental decoding equals the row of the full mask") {
  const int64_t T = 50;
  for (const auto& p : {big_bird(4), strided(5), everything(3)}) {
    auto full = parla::nn::sparse_pattern_mask(T, p, true);
    for (int64_t pos = 0; pos < T; ++pos) {
      auto row = parla::nn::sparse_pattern_row(pos, pos + 1, p, true);
      REQUIRE(torch::equal(row, full[pos].narrow(0, 0, pos + 1)));
      REQUIRE(torch::equal(row, parla::nn::sparse_pattern_mask(pos + 1, p, true)[pos]));
    }
    for (int64_t L : {7, 31}) {
      auto m = parla::nn::sparse_pattern_mask(L, p, false);
      for (int64_t i = 0; i < L; ++i) REQUIRE(torch::equal(parla::nn::sparse_pattern_row(i, L, p, false), m[i]));
    }
  }
}

TEST_CASE("attention dropout of sparse attention applies only in training") {
  const int64_t T = 20;
  auto x = random_qkv(1, 2, T, 4, 5);
  const auto p = big_bird(4);
  auto plain = parla::nn::sparse_attention(x.q, x.k, x.v, {}, p, false);
  REQUIRE(max_abs_diff(parla::nn::sparse_attention(x.q, x.k, x.v, {}, p, false, 0.5, false), plain) == 0.0);
  REQUIRE(max_abs_diff(parla::nn::sparse_attention(x.q, x.k, x.v, {}, p, false, 0.0, true), plain) == 0.0);
  auto dropped = parla::nn::sparse_attention(x.q, x.k, x.v, {}, p, false, 0.5, true);
  REQUIRE(torch::isfinite(dropped).all().item<bool>());
  REQUIRE(max_abs_diff(dropped, plain) > 1e-3);
}

TEST_CASE("invalid sparse pattern sizes are config errors that name the key") {
  SparsePattern ok = big_bird(4);
  REQUIRE(config_error(ok).empty());
  auto with = [&](auto change) {
    SparsePattern p = ok;
    p.dilated = true;
    p.block_local = true;
    change(p);
    return config_error(p);
  };
  CHECK_THAT(with([](SparsePattern& p) { p.block_size = 0; }), Catch::Contains("model.sparse_block_size"));
  CHECK_THAT(with([](SparsePattern& p) { p.window = 0; }), Catch::Contains("model.local_window"));
  CHECK_THAT(with([](SparsePattern& p) { p.window = -3; }), Catch::Contains("model.local_window"));
  CHECK_THAT(with([](SparsePattern& p) { p.global_tokens = 0; }), Catch::Contains("model.sparse_global_tokens"));
  CHECK_THAT(with([](SparsePattern& p) { p.dilation = 0; }), Catch::Contains("model.sparse_dilation"));
  CHECK_THAT(with([](SparsePattern& p) { p.dilated_window = -1; }), Catch::Contains("model.sparse_dilated_window"));
  CHECK_THAT(with([](SparsePattern& p) { p.random_blocks = 0; }), Catch::Contains("model.sparse_random_blocks"));
  SparsePattern none;
  CHECK_THAT(config_error(none), Catch::Contains("model.sparse_pattern"));
  auto x = random_qkv(1, 1, 4, 2, 6);
  CHECK_THROWS_AS(parla::nn::sparse_attention(x.q, x.k, x.v, {}, none, false), parla::ConfigError);
}

}  // namespace parla_test_sparse

// Performer attention (FAVOR+, Choromanski et al. 2021) against references written from the definitions: the
// features phi(x) = exp(w^T x - |x|^2/2)/sqrt(m) and the attention sums as double-precision loops, a dense
// unstabilised formula (for gradients), a log-domain formula (for inputs whose features underflow), softmax
// attention (for many features) and exp(x^T y) (for unbiasedness).
// REQUIRE, not CHECK: LibTorch includes glog, whose CHECK macro replaces Catch's and aborts on failure.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <torch/torch.h>

#include "core/error.h"
#include "runtime/torch_compat.h"
#include "nn/performer_attention.h"
#include "support/tensors.h"

namespace parla_test_performer {

using namespace parla::nn;
using parla::testing::max_abs_diff;

constexpr auto kF64 = torch::kFloat64;

struct LoopReference {
  torch::Tensor out, weights;  // [B, H, Tq, Dv], [B, H, Tq, Tk]
};

// The definition as loops: a_ij = sum_r phi(q_i')_r phi(k_j')_r over allowed keys (valid, and j <= i + Tk - Tq when
// causal), x' = x Dh^(-1/4); weights a_ij / sum_j a_ij; out = weights v. Rows without allowed keys are zeros.
LoopReference loop_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& valid, const torch::Tensor& w, bool causal) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2), D = q.size(3), Dv = v.size(3);
  auto wh = (w.dim() == 2 ? w.unsqueeze(0).expand({H, w.size(0), D}) : w).to(kF64).contiguous();
  const int64_t m = wh.size(1);
  auto qd = q.to(kF64), kd = k.to(kF64), vd = v.to(kF64);
  auto qa = qd.accessor<double, 4>(), ka = kd.accessor<double, 4>(), va = vd.accessor<double, 4>();
  auto wa = wh.accessor<double, 3>();
  const double sc = std::pow(static_cast<double>(D), -0.25);
  auto phi = [&](torch::TensorAccessor<double, 4> x, int64_t b, int64_t h, int64_t t) {
    std::vector<double> f(m);
    double n = 0;
    for (int64_t c = 0; c < D; ++c) n += (x[b][h][t][c] * sc) * (x[b][h][t][c] * sc);
    for (int64_t r = 0; r < m; ++r) {
      double s = 0;
      for (int64_t c = 0; c < D; ++c) s += wa[h][r][c] * x[b][h][t][c] * sc;
      f[r] = std::exp(s - n / 2) / std::sqrt(static_cast<double>(m));
    }
    return f;
  };
  LoopReference ref{torch::zeros({B, H, Tq, Dv}, kF64), torch::zeros({B, H, Tq, Tk}, kF64)};
  auto oa = ref.out.accessor<double, 4>(), pa = ref.weights.accessor<double, 4>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<std::vector<double>> fk(Tk);
      for (int64_t j = 0; j < Tk; ++j) fk[j] = phi(ka, b, h, j);
      for (int64_t i = 0; i < Tq; ++i) {
        auto fq = phi(qa, b, h, i);
        std::vector<double> a(Tk, 0.0);
        double z = 0;
        for (int64_t j = 0; j < Tk; ++j) {
          if (valid.defined() && !valid[b][j].item<bool>()) continue;
          if (causal && j > i + Tk - Tq) continue;
          for (int64_t r = 0; r < m; ++r) a[j] += fq[r] * fk[j][r];
          z += a[j];
        }
        if (z <= 0) continue;
        for (int64_t j = 0; j < Tk; ++j) {
          pa[b][h][i][j] = a[j] / z;
          for (int64_t e = 0; e < Dv; ++e) oa[b][h][i][e] += a[j] / z * va[b][h][j][e];
        }
      }
    }
  return ref;
}

// The same definition as dense LibTorch ops, unstabilised and unchunked, differentiable: the gradient reference.
torch::Tensor dense_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& valid, const torch::Tensor& w, bool causal) {
  const double sc = std::pow(static_cast<double>(q.size(-1)), -0.25);
  const double m = static_cast<double>(w.size(-2));
  auto phi = [&](const torch::Tensor& x) {
    auto xs = x * sc;
    auto proj = torch::matmul(xs, w.transpose(-2, -1));
    return torch::exp(proj - 0.5 * (xs * xs).sum(-1, true)) / std::sqrt(m);
  };
  auto a = torch::matmul(phi(q), phi(k).transpose(-2, -1));  // [B, H, Tq, Tk]
  const int64_t tq = q.size(2), tk = k.size(2);
  auto allowed = torch::ones({tq, tk}, kF64);
  if (causal) allowed = allowed.tril(tk - tq);
  a = a * allowed;
  if (valid.defined()) a = a * valid.to(kF64).view({valid.size(0), 1, 1, tk});
  return torch::matmul(a, v) / a.sum(-1, true);
}

// Softmax attention softmax(q k^T / sqrt(Dh)) v as loops; causal allows j <= i (Tq == Tk).
torch::Tensor softmax_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                                torch::Tensor* probs) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3), Dv = v.size(3);
  auto out = torch::zeros({B, H, T, Dv}, kF64);
  *probs = torch::zeros({B, H, T, T}, kF64);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> e(T, 0.0);
        double z = 0;
        for (int64_t j = 0; j < T && (!causal || j <= i); ++j) {
          double s = 0;
          for (int64_t c = 0; c < D; ++c) s += q[b][h][i][c].item<double>() * k[b][h][j][c].item<double>();
          e[j] = std::exp(s / std::sqrt(static_cast<double>(D)));
          z += e[j];
        }
        for (int64_t j = 0; j < T; ++j) {
          (*probs)[b][h][i][j].fill_(e[j] / z);
          out[b][h][i].add_(e[j] / z * v[b][h][j]);
        }
      }
  return out;
}

// Log-domain formula, safe where every feature underflows: log a_ij = logsumexp_r(log phi(q_i)_r + log phi(k_j)_r),
// weights = softmax_j over the allowed keys.
torch::Tensor log_domain_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& valid, const torch::Tensor& w, bool causal) {
  auto qd = q.to(kF64), kd = k.to(kF64), wd = w.to(kF64);
  const double sc = std::pow(static_cast<double>(q.size(-1)), -0.25);
  auto logphi = [&](const torch::Tensor& x) {
    auto xs = x * sc;
    return torch::matmul(xs, wd.transpose(-2, -1)) - 0.5 * (xs * xs).sum(-1, true);
  };
  auto l = (logphi(qd).unsqueeze(-2) + logphi(kd).unsqueeze(-3)).logsumexp(-1);  // [B, H, Tq, Tk]
  const int64_t tq = q.size(2), tk = k.size(2);
  auto allowed = torch::ones({1, 1, tq, tk}, torch::kBool);
  if (causal) allowed = allowed.tril(tk - tq);
  if (valid.defined()) allowed = allowed.logical_and(valid.view({valid.size(0), 1, 1, tk}));
  l = l.masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(l, -1), v.to(kF64));
}

double dot_double(const torch::Tensor& a, const torch::Tensor& b) { return (a * b).sum().item<double>(); }

// One estimate of exp(x.y): phi(x).phi(y) for a fresh projection.
double kernel_estimate(const torch::Tensor& x, const torch::Tensor& y, int64_t m, uint64_t seed, bool orthogonal) {
  auto w = orthogonal_random_features(m, x.size(0), seed, orthogonal).to(kF64);
  return dot_double(favor_features(x.view({1, -1}), w), favor_features(y.view({1, -1}), w));
}

TEST_CASE("positive random features estimate exp(x.y) without bias, iid and orthogonal") {
  torch::manual_seed(1);
  const int64_t d = 6, m = 64, draws = 200;
  auto x = torch::randn({d}, kF64) * 0.25, y = torch::randn({d}, kF64) * 0.25;
  const double exact = std::exp(dot_double(x, y));
  // One term exp(w.(x+y) - |x|^2/2 - |y|^2/2), w ~ N(0, I): mean exp(x.y), variance exp(2 x.y)(exp(|x+y|^2) - 1)
  // (FAVOR+ Lemma 2). The mean over draws * m iid terms has standard error sqrt(variance / (draws m)); orthogonal
  // rows lower the variance (the paper's Sec. 2.4), so the same bound holds for them.
  const double se = std::sqrt(std::exp(2 * dot_double(x, y)) * (std::exp(dot_double(x + y, x + y)) - 1) / (draws * m));
  for (bool orthogonal : {false, true}) {
    double sum = 0;
    for (int64_t s = 0; s < draws; ++s) sum += kernel_estimate(x, y, m, 1000 + s, orthogonal);
    INFO("orthogonal " << orthogonal << ": mean " << sum / draws << ", exact " << exact << ", se " << se);
    REQUIRE(std::abs(sum / draws - exact) < 5 * se);
  }
}

TEST_CASE("the relative error of one kernel estimate shrinks as the number of features grows") {
  torch::manual_seed(2);
  const int64_t d = 8, draws = 40;
  auto x = torch::randn({d}, kF64) * 0.25, y = torch::randn({d}, kF64) * 0.25;
  const double exact = std::exp(dot_double(x, y));
  for (bool orthogonal : {false, true}) {
    std::vector<double> err;
    for (int64_t m : {16, 64, 256}) {
      double e = 0;
      for (int64_t s = 0; s < draws; ++s) e += std::abs(kernel_estimate(x, y, m, 5000 + s, orthogonal) - exact) / exact;
      err.push_back(e / draws);
    }
    // The error falls like 1/sqrt(m): 16 -> 256 divides it by about 4.
    INFO("orthogonal " << orthogonal << ": errors " << err[0] << " " << err[1] << " " << err[2]);
    REQUIRE(err[1] < err[0]);
    REQUIRE(err[2] < err[1]);
    REQUIRE(err[2] < 0.5 * err[0]);
  }
}

TEST_CASE("favor features equal exp(w x - |x|^2/2)/sqrt(m) computed by loops, shared and per head") {
  torch::manual_seed(3);
  auto x = torch::randn({2, 3, 4, 5}, kF64);
  auto shared = orthogonal_random_features(7, 5, 1).to(kF64);
  auto per_head = torch::stack({orthogonal_random_features(7, 5, 2), orthogonal_random_features(7, 5, 3),
                                orthogonal_random_features(7, 5, 4)}).to(kF64);
  for (const auto& w : {shared, per_head}) {
    auto f = favor_features(x, w);
    REQUIRE(f.sizes() == torch::IntArrayRef({2, 3, 4, 7}));
    double worst = 0;
    for (int b = 0; b < 2; ++b)
      for (int h = 0; h < 3; ++h)
        for (int t = 0; t < 4; ++t)
          for (int r = 0; r < 7; ++r) {
            double s = 0, n = 0;
            for (int c = 0; c < 5; ++c) {
              double xc = x[b][h][t][c].item<double>();
              s += (w.dim() == 2 ? w[r][c] : w[h][r][c]).item<double>() * xc;
              n += xc * xc;
            }
            double expect = std::exp(s - n / 2) / std::sqrt(7.0);
            worst = std::max(worst, std::abs(f[b][h][t][r].item<double>() - expect) / expect);
          }
    REQUIRE(worst < 1e-12);
  }
}

TEST_CASE("orthogonal random features are orthogonal within a block, chi-scaled and deterministic per seed") {
  const int64_t d = 5, m = 13;  // blocks of 5, 5 and a truncated 3
  auto w = orthogonal_random_features(m, d, 42).to(kF64);
  REQUIRE(w.sizes() == torch::IntArrayRef({m, d}));
  for (int64_t start = 0; start < m; start += d) {
    auto block = w.narrow(0, start, std::min(d, m - start));
    auto u = block / block.norm(2, {1}, true);
    auto gram = torch::matmul(u, u.t());
    REQUIRE(max_abs_diff(gram, torch::eye(block.size(0), kF64)) < 1e-6);
  }
  // Rows of different blocks are independent directions, not orthogonal.
  auto u = w / w.norm(2, {1}, true);
  REQUIRE(torch::matmul(u.narrow(0, 0, 5), u.narrow(0, 5, 5).t()).abs().max().item<double>() > 1e-3);

  REQUIRE(torch::equal(orthogonal_random_features(m, d, 42), orthogonal_random_features(m, d, 42)));
  REQUIRE(!torch::equal(orthogonal_random_features(m, d, 42), orthogonal_random_features(m, d, 43)));
  REQUIRE(torch::equal(orthogonal_random_features(m, d, 7, false), orthogonal_random_features(m, d, 7, false)));
  REQUIRE(!torch::equal(orthogonal_random_features(m, d, 7, false), orthogonal_random_features(m, d, 8, false)));

  // Each row is marginally N(0, I_d): E[w w^T] = I (so E|w|^2 = d: the chi rescaling). 4000 rows give each entry of
  // the empirical second moment a standard error of at most sqrt(2/4000) = 0.022.
  for (bool orthogonal : {true, false}) {
    auto big = orthogonal_random_features(4000, d, 9, orthogonal).to(kF64);
    auto second = torch::matmul(big.t(), big) / 4000.0;
    INFO("orthogonal " << orthogonal);
    REQUIRE(max_abs_diff(second, torch::eye(d, kF64)) < 0.12);
    REQUIRE(big.pow(2).sum(1).mean().item<double>() == Approx(d).margin(0.2));
  }
}

TEST_CASE("performer attention and its weights equal the loop formula, causal and non-causal, with padding") {
  torch::manual_seed(4);
  const int64_t B = 3, H = 2, T = 6, D = 4, Dv = 3, m = 7;  // m not a multiple of D: a truncated block
  auto q = torch::randn({B, H, T, D}, kF64), k = torch::randn({B, H, T, D}, kF64);
  auto v = torch::randn({B, H, T, Dv}, kF64);
  auto valid = torch::ones({B, T}, torch::kBool);
  valid[0].narrow(0, 4, 2).fill_(false);
  valid[2].narrow(0, 1, 5).fill_(false);
  auto shared = orthogonal_random_features(m, D, 11).to(kF64);
  auto per_head = torch::stack({orthogonal_random_features(m, D, 12), orthogonal_random_features(m, D, 13)}).to(kF64);
  for (const auto& w : {shared, per_head})
    for (bool causal : {false, true}) {
      INFO("per head " << (w.dim() == 3) << ", causal " << causal);
      auto ref = loop_reference(q, k, v, valid, w, causal);
      REQUIRE(max_abs_diff(performer_attention(q, k, v, valid, w, causal), ref.out) < 1e-12);
      REQUIRE(max_abs_diff(performer_attention_weights(q, k, valid, w, causal), ref.weights) < 1e-12);
    }
  // Cross-attention shapes (Tq != Tk) and no mask.
  auto k2 = torch::randn({B, H, 9, D}, kF64), v2 = torch::randn({B, H, 9, Dv}, kF64);
  auto ref = loop_reference(q, k2, v2, {}, per_head, false);
  REQUIRE(max_abs_diff(performer_attention(q, k2, v2, {}, per_head, false), ref.out) < 1e-12);
}

TEST_CASE("causal performer attention over several chunks equals the loop formula") {
  torch::manual_seed(5);
  const int64_t B = 2, H = 2, T = 150, D = 4, Dv = 3, m = 6;  // chunks of 64: 64 + 64 + 22
  auto q = torch::randn({B, H, T, D}, kF64), k = torch::randn({B, H, T, D}, kF64);
  auto v = torch::randn({B, H, T, Dv}, kF64);
  auto valid = torch::ones({B, T}, torch::kBool);
  valid[1].narrow(0, 100, 50).fill_(false);
  auto w = orthogonal_random_features(m, D, 21).to(kF64);
  auto ref = loop_reference(q, k, v, valid, w, true);
  REQUIRE(max_abs_diff(performer_attention(q, k, v, valid, w, true), ref.out) < 1e-12);
  auto ref_all = loop_reference(q, k, v, {}, w, true);
  REQUIRE(max_abs_diff(performer_attention(q, k, v, {}, w, true), ref_all.out) < 1e-12);
}

TEST_CASE("performer weights sum to one over the allowed keys and are exactly zero elsewhere") {
  torch::manual_seed(6);
  const int64_t B = 2, H = 3, T = 5, D = 4;
  auto q = torch::randn({B, H, T, D}, kF64), k = torch::randn({B, H, T, D}, kF64);
  auto valid = torch::ones({B, T}, torch::kBool);
  valid[1].narrow(0, 3, 2).fill_(false);
  auto w = orthogonal_random_features(16, D, 31).to(kF64);
  for (bool causal : {false, true}) {
    auto a = performer_attention_weights(q, k, valid, w, causal);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i) {
          double sum = 0;
          for (int64_t j = 0; j < T; ++j) {
            bool allowed = valid[b][j].item<bool>() && (!causal || j <= i);
            double p = a[b][h][i][j].item<double>();
            if (allowed) {
              REQUIRE(p > 0);
              sum += p;
            } else {
              REQUIRE(p == 0.0);
            }
          }
          REQUIRE(sum == Approx(1.0).margin(1e-12));
        }
  }
}

TEST_CASE("incremental performer steps equal the causal full pass, and later keys do not change earlier rows") {
  torch::manual_seed(7);
  const int64_t B = 2, H = 3, T = 9, D = 4, Dv = 5, m = 10;
  auto q = torch::randn({B, H, T, D}, kF64), k = torch::randn({B, H, T, D}, kF64);
  auto v = torch::randn({B, H, T, Dv}, kF64);
  auto w = torch::stack({orthogonal_random_features(m, D, 41), orthogonal_random_features(m, D, 42),
                         orthogonal_random_features(m, D, 43)}).to(kF64);
  auto full = performer_attention(q, k, v, {}, w, true);
  LinearAttentionState state;
  for (int64_t t = 0; t < T; ++t) {
    auto step = performer_attention_step(q.narrow(2, t, 1), k.narrow(2, t, 1), v.narrow(2, t, 1), w, state);
    REQUIRE(max_abs_diff(step, full.narrow(2, t, 1)) < 1e-12);
  }
  REQUIRE(state.s.sizes() == torch::IntArrayRef({B, H, m, Dv}));
  REQUIRE(state.z.sizes() == torch::IntArrayRef({B, H, m}));
  // A much larger last key (a new maximum feature) leaves every earlier row unchanged.
  auto k_late = k.clone();
  k_late.narrow(2, T - 1, 1).mul_(6.0);
  auto late = performer_attention(q, k_late, v, {}, w, true);
  REQUIRE(max_abs_diff(late.narrow(2, 0, T - 1), full.narrow(2, 0, T - 1)) == 0.0);
  // A row appended with a zero state (SelfAttentionCache::add_rows) starts an empty history.
  LinearAttentionState grown{torch::cat({state.s, torch::zeros({1, H, m, Dv}, kF64)}),
                             torch::cat({state.z, torch::zeros({1, H, m}, kF64)})};
  LinearAttentionState fresh;
  for (int64_t t = 0; t < 3; ++t) {
    auto x = [&](const torch::Tensor& a) { return torch::cat({a.narrow(2, t, 1), a.narrow(0, 0, 1).narrow(2, t, 1)}); };
    auto both = performer_attention_step(x(q), x(k), x(v), w, grown);
    auto alone = performer_attention_step(q.narrow(0, 0, 1).narrow(2, t, 1), k.narrow(0, 0, 1).narrow(2, t, 1),
                                          v.narrow(0, 0, 1).narrow(2, t, 1), w, fresh);
    REQUIRE(max_abs_diff(both.narrow(0, B, 1), alone) < 1e-12);
  }
}

TEST_CASE("a sentence alone equals its rows in a padded batch of sentences of different lengths") {
  torch::manual_seed(8);
  const int64_t H = 2, D = 4, Dv = 3, m = 9;
  const std::vector<int64_t> lengths = {5, 3, 7};
  const int64_t B = 3, T = 7;
  // Padding positions hold large garbage: it must neither leak into real rows nor make any row NaN.
  auto q = torch::randn({B, H, T, D}, kF64) * 30, k = torch::randn({B, H, T, D}, kF64) * 30,
       v = torch::randn({B, H, T, Dv}, kF64) * 30;
  auto valid = torch::zeros({B, T}, torch::kBool);
  for (int64_t b = 0; b < B; ++b) {
    valid[b].narrow(0, 0, lengths[b]).fill_(true);
    q[b].narrow(1, 0, lengths[b]).copy_(torch::randn({H, lengths[b], D}, kF64));
    k[b].narrow(1, 0, lengths[b]).copy_(torch::randn({H, lengths[b], D}, kF64));
    v[b].narrow(1, 0, lengths[b]).copy_(torch::randn({H, lengths[b], Dv}, kF64));
  }
  auto w = torch::stack({orthogonal_random_features(m, D, 51), orthogonal_random_features(m, D, 52)}).to(kF64);
  for (bool causal : {false, true}) {
    auto out = performer_attention(q, k, v, valid, w, causal);
    auto weights = performer_attention_weights(q, k, valid, w, causal);
    REQUIRE(torch::isfinite(out).all().item<bool>());
    REQUIRE(torch::isfinite(weights).all().item<bool>());
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = lengths[b];
      auto one = [&](const torch::Tensor& x) { return x.narrow(0, b, 1).narrow(2, 0, n); };
      INFO("causal " << causal << ", sentence " << b);
      REQUIRE(max_abs_diff(performer_attention(one(q), one(k), one(v), {}, w, causal), one(out)) < 1e-12);
      REQUIRE(max_abs_diff(performer_attention_weights(one(q), one(k), {}, w, causal),
                         one(weights).narrow(3, 0, n)) < 1e-12);
    }
  }
}

TEST_CASE("with many features performer attention approaches softmax attention within its predicted error") {
  torch::manual_seed(9);
  const int64_t H = 2, T = 8, D = 4, Dv = 3, m = 4096;
  auto q = torch::randn({1, H, T, D}, kF64) * 0.5, k = torch::randn({1, H, T, D}, kF64) * 0.5,
       v = torch::randn({1, H, T, Dv}, kF64);
  auto w = torch::stack({orthogonal_random_features(m, D, 61), orthogonal_random_features(m, D, 62)}).to(kF64);
  const double sc = std::pow(static_cast<double>(D), -0.25);
  for (bool causal : {false, true}) {
    torch::Tensor p;
    auto soft = softmax_reference(q, k, v, causal, &p);
    auto out = performer_attention(q, k, v, {}, w, causal);
    // Each kernel estimate a^_ij has relative error eps_ij with sd sigma_ij = sqrt((exp(|q_i' + k_j'|^2) - 1) / m)
    // (iid features; orthogonal ones have less). To first order out_i - soft_i = sum_j p_ij eps_ij (v_j - soft_i),
    // whose sd is at most sum_j p_ij sigma_ij |v_j - soft_i| whatever the correlations: allow 5 of those for the
    // worst element and 2 for the root mean square over all elements. sigma grows like exp(|q' + k'|^2 / 2), so
    // small inputs (entries of sd 0.5, |q' + k'|^2 ~ 1) keep it near 0.02 at m = 4096.
    double worst_ratio = 0, sum_sq_ratio = 0;
    int64_t count = 0;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t e = 0; e < Dv; ++e) {
          double bound = 0;
          for (int64_t j = 0; j < T && (!causal || j <= i); ++j) {
            auto s = (q[0][h][i] + k[0][h][j]) * sc;
            double sigma = std::sqrt((std::exp(dot_double(s, s)) - 1) / m);
            bound += p[0][h][i][j].item<double>() * sigma *
                     std::abs(v[0][h][j][e].item<double>() - soft[0][h][i][e].item<double>());
          }
          double err = std::abs(out[0][h][i][e].item<double>() - soft[0][h][i][e].item<double>());
          worst_ratio = std::max(worst_ratio, err / (bound + 1e-15));
          sum_sq_ratio += std::pow(err / (bound + 1e-15), 2);
          ++count;
        }
    // The attention that ignores the scores (the mean of the allowed values): performer must be far closer to
    // softmax than that, or the check above would be vacuous.
    auto counts = causal ? torch::arange(1, T + 1, kF64).view({1, 1, T, 1})
                         : torch::full({1, 1, T, 1}, static_cast<double>(T), kF64);
    auto uniform = (causal ? v.cumsum(2) : v.sum(2, true).expand_as(v)) / counts;
    const double rms = std::sqrt(sum_sq_ratio / count), err = max_abs_diff(out, soft);
    INFO("causal " << causal << ": worst error / predicted sd " << worst_ratio << ", rms " << rms
                   << ", max error " << err << ", uniform attention's " << max_abs_diff(uniform, soft));
    REQUIRE(worst_ratio < 5.0);
    REQUIRE(rms < 2.0);
    REQUIRE(err < 0.25 * max_abs_diff(uniform, soft));
  }
}

TEST_CASE("performer gradients are finite, nonzero and equal those of the dense formula") {
  torch::manual_seed(10);
  const int64_t H = 2, D = 4, Dv = 3, m = 10;
  auto w = torch::stack({orthogonal_random_features(m, D, 71), orthogonal_random_features(m, D, 72)}).to(kF64);
  struct Case {
    int64_t B, Tq, Tk;
    bool causal;
  };
  for (auto c : {Case{3, 5, 6, false}, Case{2, 70, 70, true}}) {  // cross-attention shape; two causal chunks
    auto q0 = torch::randn({c.B, H, c.Tq, D}, kF64), k0 = torch::randn({c.B, H, c.Tk, D}, kF64),
         v0 = torch::randn({c.B, H, c.Tk, Dv}, kF64), r = torch::randn({c.B, H, c.Tq, Dv}, kF64);
    auto valid = torch::ones({c.B, c.Tk}, torch::kBool);
    valid[1].narrow(0, c.Tk - 2, 2).fill_(false);
    std::vector<torch::Tensor> grads[2];
    for (int pass = 0; pass < 2; ++pass) {
      auto q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
      auto out = pass == 0 ? performer_attention(q, k, v, valid, w, c.causal)
                           : dense_reference(q, k, v, valid, w, c.causal);
      (out * r).sum().backward();
      grads[pass] = {q.grad(), k.grad(), v.grad()};
    }
    INFO("causal " << c.causal);
    for (int i = 0; i < 3; ++i) {
      REQUIRE(torch::isfinite(grads[0][i]).all().item<bool>());
      REQUIRE(grads[0][i].abs().max().item<double>() > 1e-3);
      REQUIRE(max_abs_diff(grads[0][i], grads[1][i]) < 1e-10);
    }
    // Padded keys get no gradient.
    REQUIRE(grads[0][1][1].narrow(1, c.Tk - 2, 2).abs().max().item<double>() == 0.0);
    REQUIRE(grads[0][2][1].narrow(1, c.Tk - 2, 2).abs().max().item<double>() == 0.0);
  }
}

TEST_CASE("a batch row without any real key gives zeros and finite gradients, never NaN") {
  torch::manual_seed(11);
  auto q0 = torch::randn({2, 2, 4, 4}, kF64), k0 = torch::randn({2, 2, 4, 4}, kF64);
  auto v0 = torch::randn({2, 2, 4, 3}, kF64);
  auto valid = torch::ones({2, 4}, torch::kBool);
  valid[1].fill_(false);
  auto w = orthogonal_random_features(8, 4, 81).to(kF64);
  for (bool causal : {false, true}) {
    auto q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
    auto out = performer_attention(q, k, v, valid, w, causal);
    auto weights = performer_attention_weights(q, k, valid, w, causal);
    INFO("causal " << causal);
    REQUIRE(out[1].abs().max().item<double>() == 0.0);
    REQUIRE(weights[1].abs().max().item<double>() == 0.0);
    (out.sum() + weights.sum()).backward();
    REQUIRE(torch::isfinite(q.grad()).all().item<bool>());
    REQUIRE(torch::isfinite(k.grad()).all().item<bool>());
    REQUIRE(torch::isfinite(v.grad()).all().item<bool>());
  }
}

TEST_CASE("float32 queries or keys whose features all underflow still match the log-domain formula") {
  torch::manual_seed(12);
  const int64_t B = 2, H = 2, T = 6, D = 8, m = 32;
  const double sc = std::pow(static_cast<double>(D), -0.25);
  auto w = orthogonal_random_features(m, D, 91);  // float32
  auto v = torch::randn({B, H, T, 3});
  auto valid = torch::ones({B, T}, torch::kBool);
  valid[0].narrow(0, 4, 2).fill_(false);
  // Vectors with |x'| = |x| Dh^(-1/4) = 22: every log feature w.x' - |x'|^2/2 <= |w||x'| - 242 stays below -110 for
  // these w (REQUIRE'd), beyond float32's exp range (exp(-104) is its smallest denormal): unstabilised features
  // are all 0 and the plain formula gives 0/0. One side large at a time: with both, the products span more than
  // float32's range and the dominant terms themselves underflow (a limit of any factored estimate).
  auto large = [&](const torch::Tensor& x) { return x / x.norm(2, {-1}, true) * (22 / sc); };
  auto log_features = [&](const torch::Tensor& x) {
    auto xs = x.to(kF64) * sc;
    return torch::matmul(xs, w.to(kF64).t()) - 0.5 * (xs * xs).sum(-1, true);
  };
  struct Case {
    bool causal, large_queries;
  };
  for (auto c : {Case{false, true}, Case{true, true}, Case{false, false}}) {
    auto q = torch::randn({B, H, T, D}), k = torch::randn({B, H, T, D});
    if (c.large_queries) q = large(q);
    else k = large(k);
    REQUIRE(log_features(c.large_queries ? q : k).max().item<double>() < -110);
    auto ref = log_domain_reference(q, k, v, valid, w, c.causal);
    auto out = performer_attention(q, k, v, valid, w, c.causal);
    INFO("causal " << c.causal << ", large queries " << c.large_queries);
    REQUIRE(torch::isfinite(out).all().item<bool>());
    REQUIRE(max_abs_diff(out, ref) < 2e-3);
  }
}

TEST_CASE("half and bfloat16 inputs are computed in float32 and returned in their dtype, also under autocast") {
  torch::manual_seed(13);
  const int64_t B = 2, H = 2, T = 6, D = 8, Dv = 3, m = 16;
  auto w = orthogonal_random_features(m, D, 101);
  auto q = torch::randn({B, H, T, D}) * 2, k = torch::randn({B, H, T, D}) * 2, v = torch::randn({B, H, T, Dv});
  auto valid = torch::ones({B, T}, torch::kBool);
  valid[1].narrow(0, 4, 2).fill_(false);
  // The exact result for the rounded inputs, then rounded once more: 2^-8 (bfloat16) or 2^-11 (half) of |out| <= 3.
  for (auto dtype : {torch::kHalf, torch::kBFloat16}) {
    const double tol = dtype == torch::kHalf ? 3e-3 : 2e-2;
    auto qh = q.to(dtype), kh = k.to(dtype), vh = v.to(dtype);
    for (bool causal : {false, true}) {
      INFO("dtype " << static_cast<int>(dtype) << ", causal " << causal);
      auto ref = loop_reference(qh, kh, vh, valid, w, causal);
      auto out = performer_attention(qh, kh, vh, valid, w, causal);
      auto weights = performer_attention_weights(qh, kh, valid, w, causal);
      REQUIRE(out.scalar_type() == dtype);
      REQUIRE(weights.scalar_type() == dtype);
      REQUIRE(max_abs_diff(out, ref.out) < tol);
      REQUIRE(max_abs_diff(weights, ref.weights) < tol);
    }
    LinearAttentionState state;
    auto causal_ref = loop_reference(qh, kh, vh, {}, w, true);
    for (int64_t t = 0; t < T; ++t) {
      auto step = performer_attention_step(qh.narrow(2, t, 1), kh.narrow(2, t, 1), vh.narrow(2, t, 1), w, state);
      REQUIRE(step.scalar_type() == dtype);
      REQUIRE(state.s.scalar_type() == torch::kFloat);
      REQUIRE(max_abs_diff(step, causal_ref.out.narrow(2, t, 1)) < tol);
    }
  }
  // Float32 inputs under CPU autocast (bfloat16), which would otherwise run the matmuls in bfloat16: the same
  // result as without autocast, bit for bit.
  for (bool causal : {false, true}) {
    auto plain = performer_attention(q, k, v, valid, w, causal);
    auto plain_weights = performer_attention_weights(q, k, valid, w, causal);
    LinearAttentionState s1, s2;
    auto plain_step = performer_attention_step(q.narrow(2, 0, 1), k.narrow(2, 0, 1), v.narrow(2, 0, 1), w, s1);
    parla::compat::set_autocast(torch::kCPU, true, torch::kBFloat16);
    auto matmul_dtype = torch::matmul(q, k.transpose(-2, -1)).scalar_type();
    auto under = performer_attention(q, k, v, valid, w, causal);
    auto under_weights = performer_attention_weights(q, k, valid, w, causal);
    auto under_step = performer_attention_step(q.narrow(2, 0, 1), k.narrow(2, 0, 1), v.narrow(2, 0, 1), w, s2);
    const bool still_on = parla::compat::autocast_enabled(torch::kCPU);
    parla::compat::set_autocast(torch::kCPU, false, torch::kBFloat16);
    INFO("causal " << causal);
    REQUIRE(matmul_dtype == torch::kBFloat16);  // autocast was really on
    REQUIRE(still_on);                          // and is restored after each call
    REQUIRE(max_abs_diff(under, plain) == 0.0);
    REQUIRE(max_abs_diff(under_weights, plain_weights) == 0.0);
    REQUIRE(max_abs_diff(under_step, plain_step) == 0.0);
  }
}

TEST_CASE("features are redrawn after every redraw_every updates and never for zero") {
  for (int64_t every : {0, 1, 3, 5}) {
    // A counter of the updates taken with the current draw, reset at each redraw.
    int64_t with_current = 0;
    for (int64_t done = 0; done < 40; ++done) {
      bool expect = every > 0 && with_current == every;
      INFO("every " << every << ", updates done " << done);
      REQUIRE(performer_redraw_due(done, every) == expect);
      if (expect) with_current = 0;
      ++with_current;
    }
  }
}

TEST_CASE("performer settings out of range are config errors naming their key") {
  REQUIRE_NOTHROW(validate_performer(1, 0));
  REQUIRE_NOTHROW(validate_performer(256, 1000));
  REQUIRE_THROWS_AS(validate_performer(0, 0), parla::ConfigError);
  REQUIRE_THROWS_WITH(validate_performer(0, 0), Catch::Contains("model.performer_features"));
  REQUIRE_THROWS_AS(validate_performer(64, -1), parla::ConfigError);
  REQUIRE_THROWS_WITH(validate_performer(64, -1), Catch::Contains("model.performer_redraw_every"));
}

}  // namespace parla_test_performer

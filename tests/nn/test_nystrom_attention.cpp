// Nyström attention (Xiong et al. 2021) against naive double-precision references: full softmax attention by
// loops, SVD pseudo-inverses, segment means and convolutions by loops.
// REQUIRE, not CHECK: LibTorch includes glog, whose CHECK macro replaces Catch's and aborts on failure.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include <torch/torch.h>

#include "core/error.h"
#include "runtime/torch_compat.h"
#include "nn/nystrom_attention.h"
#include "support/tensors.h"

namespace parla_test_nystrom {

using parla::testing::max_abs_diff;
namespace nn = parla::nn;

const auto kF64 = torch::TensorOptions().dtype(torch::kFloat64);

// key_valid [B, T] for right-padded rows of the given lengths.
torch::Tensor valid_mask(const std::vector<int64_t>& lengths, int64_t t) {
  auto m = torch::zeros({static_cast<int64_t>(lengths.size()), t}, torch::kBool);
  for (size_t b = 0; b < lengths.size(); ++b) m[b].narrow(0, 0, lengths[b]).fill_(true);
  return m;
}

// Random [B, H, T, D] with large garbage at padded positions, so that any leak shows.
torch::Tensor random_padded(int64_t b, int64_t h, int64_t t, int64_t d, const torch::Tensor& valid) {
  auto x = torch::randn({b, h, t, d}, kF64);
  auto garbage = torch::randn({b, h, t, d}, kF64) * 1e3;
  return torch::where(valid.view({b, 1, t, 1}), x, garbage);
}

// Softmax attention of one row and head over the first L positions, by loops: [L, D] outputs and [L, L] weights.
void naive_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t b, int64_t h,
                     int64_t len, torch::Tensor& out, torch::Tensor& weights) {
  auto Q = q.accessor<double, 4>(), K = k.accessor<double, 4>(), V = v.accessor<double, 4>();
  const int64_t d = q.size(3);
  out = torch::zeros({len, d}, kF64);
  weights = torch::zeros({len, len}, kF64);
  auto O = out.accessor<double, 2>(), W = weights.accessor<double, 2>();
  for (int64_t i = 0; i < len; ++i) {
    std::vector<double> s(len);
    double mx = -INFINITY, z = 0;
    for (int64_t j = 0; j < len; ++j) {
      double dot = 0;
      for (int64_t c = 0; c < d; ++c) dot += Q[b][h][i][c] * K[b][h][j][c];
      s[j] = dot / std::sqrt(static_cast<double>(d));
      mx = std::max(mx, s[j]);
    }
    for (int64_t j = 0; j < len; ++j) z += (s[j] = std::exp(s[j] - mx));
    for (int64_t j = 0; j < len; ++j) {
      W[i][j] = s[j] / z;
      for (int64_t c = 0; c < d; ++c) O[i][c] += W[i][j] * V[b][h][j][c];
    }
  }
}

// Moore-Penrose pseudo-inverse of each [r, c] matrix by SVD, singular values below rel * sigma_max taken as zero.
torch::Tensor svd_pinv(const torch::Tensor& a, double rel = 1e-10) {
  auto usv = torch::linalg_svd(a, /*full_matrices=*/false);
  auto u = std::get<0>(usv), s = std::get<1>(usv), vh = std::get<2>(usv);
  auto cut = std::get<0>(s.max(-1, /*keepdim=*/true)) * rel;
  auto s_inv = torch::where(s > cut, 1.0 / s, torch::zeros_like(s));
  return torch::matmul(vh.transpose(-2, -1) * s_inv.unsqueeze(-2), u.transpose(-2, -1));
}

// Row-stochastic, diagonally dominant random softmax matrices [n, m, m], checked to be well-conditioned (a weaker
// diagonal, + 3 I, gave a smallest singular value of 0.03: 6 iterations are then far from converged).
torch::Tensor well_conditioned_softmax(int64_t n, int64_t m) {
  auto a = torch::softmax(torch::randn({n, m, m}, kF64) + 4.0 * torch::eye(m, kF64), -1);
  REQUIRE(torch::linalg_svdvals(a).min().item<double>() > 0.2);
  return a;
}

TEST_CASE("with one landmark per position and the exact inverse nystrom attention equals full softmax attention") {
  // Rows shorter than the landmark count repeat landmarks; the header shows that this is still exact.
  torch::manual_seed(1);
  const int64_t B = 3, H = 2, T = 7, D = 4;
  const std::vector<int64_t> lengths{7, 5, 2};
  auto valid = valid_mask(lengths, T);
  auto q = random_padded(B, H, T, D, valid), k = random_padded(B, H, T, D, valid), v = random_padded(B, H, T, D, valid);
  auto out = nn::nystrom_attention(q, k, v, valid, /*landmarks=*/T, 6, /*exact_inverse=*/true);
  auto w = nn::nystrom_attention_weights(q, k, valid, T, 6, /*exact_inverse=*/true);
  REQUIRE(out.sizes() == q.sizes());
  REQUIRE(w.sizes() == torch::IntArrayRef({B, H, T, T}));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t L = lengths[b];
      torch::Tensor ref_out, ref_w;
      naive_attention(q, k, v, b, h, L, ref_out, ref_w);
      REQUIRE(max_abs_diff(out[b][h].narrow(0, 0, L), ref_out) < 1e-9);
      REQUIRE(max_abs_diff(w[b][h].narrow(0, 0, L).narrow(1, 0, L), ref_w) < 1e-9);
      // Padded keys get exactly zero weight, from every query row.
      if (L < T) REQUIRE(w[b][h].narrow(1, L, T - L).abs().max().item<double>() == 0.0);
    }
  REQUIRE(torch::isfinite(out).all().item<bool>());
  REQUIRE(torch::isfinite(w).all().item<bool>());
}

TEST_CASE("with one landmark per position the iterative inverse approaches full softmax attention") {
  torch::manual_seed(2);
  const int64_t B = 2, H = 2, T = 6, D = 4;
  // Sharper scores (larger queries) make the landmark kernel better conditioned, as trained attention tends to be.
  auto q = torch::randn({B, H, T, D}, kF64) * 3.0, k = torch::randn({B, H, T, D}, kF64),
       v = torch::randn({B, H, T, D}, kF64);
  auto few = nn::nystrom_attention(q, k, v, torch::Tensor(), T, /*pinv_iterations=*/6);
  auto many = nn::nystrom_attention(q, k, v, torch::Tensor(), T, /*pinv_iterations=*/40);
  double err_few = 0, err_many = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      torch::Tensor ref_out, ref_w;
      naive_attention(q, k, v, b, h, T, ref_out, ref_w);
      err_few = std::max(err_few, max_abs_diff(few[b][h], ref_out));
      err_many = std::max(err_many, max_abs_diff(many[b][h], ref_out));
    }
  REQUIRE(err_few < 5e-2);
  REQUIRE(err_many < 1e-9);
}

TEST_CASE("the iterative pseudo-inverse converges to the SVD pseudo-inverse, its error shrinking with each iteration") {
  torch::manual_seed(3);
  auto a = well_conditioned_softmax(4, 8);
  auto ref = svd_pinv(a);
  std::vector<double> errors;
  for (int64_t it = 0; it <= 10; ++it) errors.push_back(max_abs_diff(nn::iterative_pinv(a, it), ref));
  for (size_t j = 0; j + 1 < errors.size(); ++j) {
    INFO("iteration " << j << " error " << errors[j] << " -> " << errors[j + 1]);
    if (errors[j] > 1e-12) REQUIRE(errors[j + 1] < errors[j]);
  }
  REQUIRE(max_abs_diff(nn::iterative_pinv(a), ref) < 1e-8);  // the default 6 iterations
  REQUIRE(errors.back() < 1e-12);
}

TEST_CASE("the iterative pseudo-inverse scales each matrix of a batch by its own norms") {
  // With one norm for the whole batch (the reference code) the small matrix would start far too small and
  // still be far from its inverse after 8 iterations.
  torch::manual_seed(4);
  auto base = well_conditioned_softmax(3, 6);
  auto scales = torch::tensor({1.0, 1e3, 1e-3}, kF64).view({3, 1, 1});
  auto a = base * scales;
  auto z = nn::iterative_pinv(a, 8);
  for (int64_t i = 0; i < 3; ++i) {
    auto ref = svd_pinv(a[i]);
    INFO("matrix " << i);
    REQUIRE(max_abs_diff(z[i], ref) / ref.abs().max().item<double>() < 1e-10);
  }
}

TEST_CASE("the iterative pseudo-inverse satisfies the four Penrose conditions, also for a singular matrix") {
  torch::manual_seed(5);
  auto full = well_conditioned_softmax(1, 5)[0];
  // Repeated landmarks (a row shorter than the landmark count) give an exactly singular kernel: rank 5 of 7.
  auto scores = torch::randn({5, 5}, kF64) + 3.0 * torch::eye(5, kF64);
  auto pick = torch::tensor({0, 0, 1, 2, 3, 4, 4}, torch::kLong);
  auto singular = torch::softmax(scores.index_select(0, pick).index_select(1, pick), -1);
  for (const auto& a : {full, singular}) {
    auto z = nn::iterative_pinv(a, 20);
    auto az = torch::matmul(a, z), za = torch::matmul(z, a);
    REQUIRE(max_abs_diff(torch::matmul(az, a), a) < 1e-10);       // A Z A = A
    REQUIRE(max_abs_diff(torch::matmul(za, z), z) < 1e-9);        // Z A Z = Z
    REQUIRE(max_abs_diff(az, az.transpose(0, 1)) < 1e-10);        // (A Z)^T = A Z
    REQUIRE(max_abs_diff(za, za.transpose(0, 1)) < 1e-10);        // (Z A)^T = Z A
    REQUIRE(max_abs_diff(z, svd_pinv(a)) < 1e-9);
  }
}

TEST_CASE("landmarks are the means of the segments of real positions, without padding, also for rows shorter than m") {
  torch::manual_seed(6);
  const int64_t B = 4, H = 2, T = 9, D = 3;
  const std::vector<int64_t> lengths{9, 5, 2, 7};
  auto valid = valid_mask(lengths, T);
  auto x = random_padded(B, H, T, D, valid);
  for (int64_t m : {1, 3, 4, 9}) {
    auto got = nn::nystrom_landmarks(x, valid, m);
    REQUIRE(got.sizes() == torch::IntArrayRef({B, H, m, D}));
    auto X = x.accessor<double, 4>();
    for (int64_t b = 0; b < B; ++b) {
      const int64_t L = lengths[b];
      for (int64_t s = 0; s < m; ++s) {
        // L >= m: positions [floor(s L / m), floor((s + 1) L / m)); L < m: the single position floor(s L / m).
        const int64_t lo = s * L / m, hi = L >= m ? (s + 1) * L / m : lo + 1;
        REQUIRE(hi > lo);
        for (int64_t h = 0; h < H; ++h)
          for (int64_t c = 0; c < D; ++c) {
            double sum = 0;
            for (int64_t t = lo; t < hi; ++t) sum += X[b][h][t][c];
            INFO("m " << m << " row " << b << " segment " << s);
            REQUIRE(std::abs(got[b][h][s][c].item<double>() - sum / static_cast<double>(hi - lo)) < 1e-12);
          }
      }
    }
  }
  // No mask means every position is real.
  auto all = nn::nystrom_landmarks(x, torch::Tensor(), 4);
  REQUIRE(max_abs_diff(all, nn::nystrom_landmarks(x, torch::ones({B, T}, torch::kBool), 4)) == 0.0);
  REQUIRE(max_abs_diff(all[0], nn::nystrom_landmarks(x, valid, 4)[0]) < 1e-15);
}

// Depthwise convolution along the sequence by loops: zero outside [0, L), kernel centred.
torch::Tensor naive_conv(const torch::Tensor& v, const torch::Tensor& weight, int64_t b, int64_t len) {
  const int64_t H = v.size(1), D = v.size(3), K = weight.size(2);
  auto V = v.accessor<double, 4>(), Wt = weight.accessor<double, 4>();
  auto out = torch::zeros({H, len, D}, kF64);
  auto O = out.accessor<double, 3>();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < len; ++t)
      for (int64_t c = 0; c < D; ++c)
        for (int64_t i = 0; i < K; ++i) {
          const int64_t p = t + i - K / 2;
          if (p >= 0 && p < len) O[h][t][c] += Wt[h][0][i][0] * V[b][h][p][c];
        }
  return out;
}

TEST_CASE("the depthwise convolution skip equals a loop over the kernel taps with zeros outside the real positions") {
  torch::manual_seed(7);
  const int64_t B = 3, H = 3, T = 8, D = 2;
  const std::vector<int64_t> lengths{8, 5, 1};
  auto valid = valid_mask(lengths, T);
  auto v = random_padded(B, H, T, D, valid);
  for (int64_t K : {1, 5, 33}) {  // 33 (the paper's) is wider than the sequence
    auto weight = torch::randn({H, 1, K, 1}, kF64);
    auto got = nn::depthwise_conv_skip(v, valid, weight);
    REQUIRE(got.sizes() == v.sizes());
    for (int64_t b = 0; b < B; ++b) {
      INFO("kernel " << K << " row " << b);
      REQUIRE(max_abs_diff(got[b].narrow(1, 0, lengths[b]), naive_conv(v, weight, b, lengths[b])) < 1e-12);
    }
  }
}

TEST_CASE("a padded batch gives each sentence the nystrom attention, weights and convolution skip of batch 1") {
  torch::manual_seed(8);
  const int64_t B = 3, H = 2, T = 9, D = 4, m = 4;
  const std::vector<int64_t> lengths{9, 6, 3};  // longer and shorter than m
  auto valid = valid_mask(lengths, T);
  auto q = random_padded(B, H, T, D, valid), k = random_padded(B, H, T, D, valid), v = random_padded(B, H, T, D, valid);
  auto weight = torch::randn({H, 1, 5, 1}, kF64);
  auto out = nn::nystrom_attention(q, k, v, valid, m);
  auto w = nn::nystrom_attention_weights(q, k, valid, m);
  auto conv = nn::depthwise_conv_skip(v, valid, weight);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t L = lengths[b];
    auto one = [&](const torch::Tensor& x) { return x.narrow(0, b, 1).narrow(2, 0, L); };
    auto out1 = nn::nystrom_attention(one(q), one(k), one(v), torch::Tensor(), m);
    auto w1 = nn::nystrom_attention_weights(one(q), one(k), torch::Tensor(), m);
    auto conv1 = nn::depthwise_conv_skip(one(v), torch::Tensor(), weight);
    INFO("row " << b);
    REQUIRE(max_abs_diff(one(out), out1) < 1e-12);
    REQUIRE(max_abs_diff(one(w).narrow(3, 0, L), w1) < 1e-12);
    REQUIRE(max_abs_diff(one(conv), conv1) < 1e-12);
  }
  REQUIRE(torch::isfinite(out).all().item<bool>());
}

TEST_CASE("gradients with one landmark per position and the exact inverse equal those of dense softmax attention") {
  torch::manual_seed(9);
  const int64_t B = 1, H = 2, T = 5, D = 3;
  auto q0 = torch::randn({B, H, T, D}, kF64) * 2.0, k0 = torch::randn({B, H, T, D}, kF64),
       v0 = torch::randn({B, H, T, D}, kF64);
  auto g = torch::randn({B, H, T, D}, kF64);
  auto grads = [&](bool nystrom) {
    auto q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
    torch::Tensor out;
    if (nystrom) {
      out = nn::nystrom_attention(q, k, v, torch::Tensor(), T, 6, /*exact_inverse=*/true);
    } else {
      auto p = torch::softmax(torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(D)), -1);
      out = torch::matmul(p, v);
    }
    (out * g).sum().backward();
    return std::vector<torch::Tensor>{q.grad(), k.grad(), v.grad()};
  };
  auto got = grads(true), ref = grads(false);
  for (int i = 0; i < 3; ++i) {
    INFO("gradient of input " << i << " (q, k, v)");
    REQUIRE(torch::isfinite(got[i]).all().item<bool>());
    REQUIRE(max_abs_diff(got[i], ref[i]) < 1e-8);
  }
}

TEST_CASE("gradients through padded batches are finite, and padded positions get none from the real outputs") {
  torch::manual_seed(10);
  const int64_t B = 4, H = 2, T = 8, D = 4, m = 3;
  const std::vector<int64_t> lengths{8, 5, 2, 0};  // the last row has no real token at all
  auto valid = valid_mask(lengths, T);
  for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
    for (bool real_only : {false, true}) {
      auto q = random_padded(B, H, T, D, valid).to(dtype).requires_grad_();
      auto k = random_padded(B, H, T, D, valid).to(dtype).requires_grad_();
      auto v = random_padded(B, H, T, D, valid).to(dtype).requires_grad_();
      auto weight = torch::randn({H, 1, 5, 1}, torch::TensorOptions().dtype(dtype)).requires_grad_();
      auto out = nn::nystrom_attention(q, k, v, valid, m) + nn::depthwise_conv_skip(v, valid, weight);
      INFO("dtype " << c10::toString(dtype) << (real_only ? ", loss on real rows" : ", loss on all rows"));
      REQUIRE(torch::isfinite(out).all().item<bool>());
      // The row without real tokens attends to nothing: zero attention output.
      REQUIRE(nn::nystrom_attention(q, k, v, valid, m)[3].abs().max().item<double>() == 0.0);
      auto g = torch::randn(out.sizes(), out.options());
      if (real_only) g = g * valid.view({B, 1, T, 1}).to(dtype);
      (out * g).sum().backward();
      for (const auto& t : {q, k, v, weight}) REQUIRE(torch::isfinite(t.grad()).all().item<bool>());
      if (real_only) {
        auto pad = valid.logical_not().view({B, 1, T, 1}).expand({B, H, T, D});
        for (const auto& t : {q, k, v}) REQUIRE(t.grad().masked_select(pad).abs().max().item<double>() == 0.0);
      }
    }
  }
}

// CPU autocast to bfloat16 for the lifetime of the guard (restored even when a REQUIRE throws).
struct CpuAutocast {
  CpuAutocast() { parla::compat::set_autocast(c10::kCPU, true, torch::kBFloat16); }
  ~CpuAutocast() { parla::compat::set_autocast(c10::kCPU, false, torch::kBFloat16); }
};

TEST_CASE("under bfloat16 autocast the pseudo-inverse is still iterated in float32") {
  // Autocast would run its matmuls in bfloat16: an error of about 2e-2 instead of 5e-7.
  torch::manual_seed(11);
  auto a = well_conditioned_softmax(4, 8);
  auto ref = svd_pinv(a);
  auto af = a.to(torch::kFloat32);
  const int64_t B = 2, H = 2, T = 9, D = 4;
  auto valid = valid_mask({9, 4}, T);
  auto f32 = [&] { return random_padded(B, H, T, D, valid).to(torch::kFloat32); };
  auto q = f32(), k = f32(), v = f32();
  auto out_fp32 = nn::nystrom_attention(q, k, v, valid, 3);
  torch::Tensor z, out;
  {
    CpuAutocast autocast;
    z = nn::iterative_pinv(af, 10);
    REQUIRE(parla::compat::autocast_enabled(c10::kCPU));
    out = nn::nystrom_attention(q, k, v, valid, 3);
  }
  REQUIRE(z.scalar_type() == torch::kFloat32);
  REQUIRE(max_abs_diff(z, ref) < 1e-5);
  auto real = valid.view({B, 1, T, 1}).expand({B, H, T, D});
  REQUIRE(torch::isfinite(out).all().item<bool>());
  REQUIRE(max_abs_diff(out.masked_select(real), out_fp32.masked_select(real)) < 0.2);  // bf16 scores: 0.07
}

TEST_CASE("nystrom settings out of range are config errors that name their key") {
  using Catch::Matchers::Contains;
  REQUIRE_NOTHROW(nn::validate_nystrom(64, 6, 33));
  REQUIRE_NOTHROW(nn::validate_nystrom(1, 1, 0));
  REQUIRE_THROWS_AS(nn::validate_nystrom(0, 6, 33), parla::ConfigError);
  REQUIRE_THROWS_WITH(nn::validate_nystrom(0, 6, 33), Contains("model.nystrom_landmarks"));
  REQUIRE_THROWS_AS(nn::validate_nystrom(64, 0, 33), parla::ConfigError);
  REQUIRE_THROWS_WITH(nn::validate_nystrom(64, 0, 33), Contains("model.nystrom_pinv_iterations"));
  REQUIRE_THROWS_AS(nn::validate_nystrom(64, 6, 32), parla::ConfigError);
  REQUIRE_THROWS_WITH(nn::validate_nystrom(64, 6, 32), Contains("model.nystrom_conv_kernel"));
  REQUIRE_THROWS_WITH(nn::validate_nystrom(64, 6, -1), Contains("model.nystrom_conv_kernel"));
}

}  // namespace parla_test_nystrom

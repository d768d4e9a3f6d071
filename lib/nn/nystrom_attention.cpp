#include "nn/nystrom_attention.h"

#include <cmath>
#include <string>

#include <torch/torch.h>

#include "core/error.h"
#include "runtime/torch_compat.h"
#include "nn/masked_softmax.h"

namespace parla::nn {

namespace {

void check_qkv(const torch::Tensor& x, const char* name, const torch::Tensor& q, const torch::Tensor& key_valid) {
  TORCH_CHECK(x.dim() == 4, "nystrom attention: ", name, " must be [B, H, T, Dh], got ", x.sizes());
  TORCH_CHECK(x.size(0) == q.size(0) && x.size(1) == q.size(1) && x.size(2) == q.size(2),
              "nystrom attention: ", name, " ", x.sizes(), " does not match q ", q.sizes(),
              " (self-attention: queries and keys are the same positions)");
  if (key_valid.defined())
    TORCH_CHECK(key_valid.dim() == 2 && key_valid.size(0) == x.size(0) && key_valid.size(1) == x.size(2),
                "nystrom attention: key_valid must be [B, T] = [", x.size(0), ", ", x.size(2), "], got ",
                key_valid.sizes());
}

// Zeroes the padded positions of x [B, H, T, D]: the pooling weights there are zero already, but 0 * inf would
// still be NaN, so nothing of a padded position may reach a product.
torch::Tensor zero_padding(const torch::Tensor& x, const torch::Tensor& key_valid) {
  if (!key_valid.defined()) return x;
  return x.masked_fill(key_valid.to(torch::kBool).logical_not().view({x.size(0), 1, x.size(2), 1}), 0.0);
}

// The pooling matrix P [B, m, T] of the segment rule in the header: P[b, s, t] = 1 / |segment s| when real position
// t of row b lies in segment s, else 0 (a row without real positions gives zeros). Landmarks = P x, linear in T
// and differentiable; the segments are computed on the ranks of the real positions, so any padding pattern works.
torch::Tensor segment_pooling(const torch::Tensor& key_valid, int64_t batch, int64_t t, int64_t m,
                              const torch::TensorOptions& options) {
  auto long_opts = torch::TensorOptions().dtype(torch::kLong).device(options.device());
  auto valid = key_valid.defined() ? key_valid.to(torch::kBool)
                                   : torch::ones({batch, t}, long_opts.dtype(torch::kBool));
  auto count = valid.to(torch::kLong);
  auto rank = count.cumsum(1) - 1;                                   // [B, T] index among the real positions
  auto length = count.sum(1, /*keepdim=*/true);                      // [B, 1] = L
  auto s = torch::arange(m, long_opts);                              // [m]
  auto start = torch::div(s * length, m, "floor");                   // [B, m] floor(s L / m)
  auto end = torch::maximum(torch::div((s + 1) * length, m, "floor"), start + 1);
  auto r = rank.unsqueeze(1);                                        // [B, 1, T]
  auto member = (r >= start.unsqueeze(-1)) & (r < end.unsqueeze(-1)) & valid.unsqueeze(1);  // [B, m, T]
  auto w = member.to(options.dtype());
  return w / w.sum(-1, /*keepdim=*/true).clamp_min(1.0);
}

// F = softmax(Q K~^T), A = softmax(Q~ K~^T), B = softmax(Q~ K^T) over the real keys, for q, k [B, H, T, Dh].
struct NystromFactors {
  torch::Tensor f, a, b;
};

NystromFactors nystrom_factors(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& key_valid,
                               int64_t landmarks) {
  TORCH_CHECK(q.dim() == 4, "nystrom attention: q must be [B, H, T, Dh], got ", q.sizes());
  check_qkv(k, "k", q, key_valid);
  TORCH_CHECK(landmarks >= 1, "nystrom attention: need at least one landmark, got ", landmarks);
  const int64_t batch = q.size(0), t = q.size(2);
  // 1/sqrt(Dh) on the queries only: the landmark means are linear, so Q~ carries the same scale.
  auto qs = zero_padding(q, key_valid) * (1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  auto kz = zero_padding(k, key_valid);
  auto pool = segment_pooling(key_valid, batch, t, landmarks, q.options()).unsqueeze(1);  // [B, 1, m, T]
  auto ql = torch::matmul(pool, qs);                                 // [B, H, m, Dh]
  auto kl = torch::matmul(pool, kz);
  auto klt = kl.transpose(-2, -1);
  NystromFactors out;
  // Every landmark is made of real positions only, so F and A need no mask; padded query rows of F stay finite.
  out.f = torch::softmax(torch::matmul(qs, klt), -1);               // [B, H, T, m]
  out.a = torch::softmax(torch::matmul(ql, klt), -1);               // [B, H, m, m]
  torch::Tensor allowed;
  if (key_valid.defined()) allowed = key_valid.to(torch::kBool).view({batch, 1, 1, t});
  out.b = masked_softmax(torch::matmul(ql, kz.transpose(-2, -1)), allowed);  // [B, H, m, T]
  return out;
}


torch::Tensor landmark_pinv(const torch::Tensor& a, int64_t iterations, bool exact) {
  if (!exact) return iterative_pinv(a, iterations);
  // SVD with LibTorch's default cut-off (singular values below eps * m * sigma_max count as zero), which repeated
  // landmarks (L < m) need: their A is exactly singular.
  const bool reduced = a.scalar_type() == torch::kHalf || a.scalar_type() == torch::kBFloat16;
  auto x = reduced ? a.to(torch::kFloat) : a;
  auto z = torch::linalg_pinv(x);
  return reduced ? z.to(a.scalar_type()) : z;
}

}  // namespace

torch::Tensor nystrom_landmarks(const torch::Tensor& x, const torch::Tensor& key_valid, int64_t landmarks) {
  TORCH_CHECK(x.dim() == 4, "nystrom_landmarks: x must be [B, H, T, Dh], got ", x.sizes());
  check_qkv(x, "x", x, key_valid);
  TORCH_CHECK(landmarks >= 1, "nystrom_landmarks: need at least one landmark, got ", landmarks);
  auto pool = segment_pooling(key_valid, x.size(0), x.size(2), landmarks, x.options()).unsqueeze(1);
  return torch::matmul(pool, zero_padding(x, key_valid));
}

torch::Tensor iterative_pinv(const torch::Tensor& a, int64_t iterations) {
  TORCH_CHECK(a.dim() >= 2, "iterative_pinv: need a matrix [..., r, c], got ", a.sizes());
  TORCH_CHECK(iterations >= 0, "iterative_pinv: negative iteration count ", iterations);
  // Reduced precision cannot resolve the residual the iteration drives to zero; iterate in float32.
  // Under mixed precision autocast would run the iteration's matmuls in fp16/bf16, whose rounding (1e-3) the
  // residual I - A Z cannot get below.
  compat::AutocastOff no_autocast(a.device().type());
  const bool reduced = a.scalar_type() == torch::kHalf || a.scalar_type() == torch::kBFloat16;
  auto x = reduced ? a.to(torch::kFloat) : a;
  auto abs = x.abs();
  // ||A||_1 (largest column sum) and ||A||_inf (largest row sum) of EACH matrix. The Nyströmformer reference code
  // takes the maximum over the whole batch, which lets the other sentences (and heads) of a batch change every
  // sentence's starting point, and so its result after a fixed number of iterations: padding and batch
  // composition would leak. Per matrix, sigma_max^2 <= ||A||_1 ||A||_inf still bounds the spectrum of A Z_0 by 1.
  auto norm1 = std::get<0>(abs.sum(-2).max(-1));
  auto norm_inf = std::get<0>(abs.sum(-1).max(-1));
  auto scale = (norm1 * norm_inf).clamp_min(1e-30).unsqueeze(-1).unsqueeze(-1);
  auto z = x.transpose(-2, -1) / scale;
  auto eye = torch::eye(x.size(-2), x.options());
  for (int64_t j = 0; j < iterations; ++j) {
    auto az = torch::matmul(x, z);
    z = 0.25 * torch::matmul(z, 13.0 * eye - torch::matmul(az, 15.0 * eye - torch::matmul(az, 7.0 * eye - az)));
  }
  return reduced ? z.to(a.scalar_type()) : z;
}

torch::Tensor nystrom_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const torch::Tensor& key_valid, int64_t landmarks, int64_t pinv_iterations,
                                bool exact_inverse) {
  auto fac = nystrom_factors(q, k, key_valid, landmarks);
  check_qkv(v, "v", q, key_valid);
  // Right to left: B V [m, Dh], A^+ (B V) [m, Dh], F (...) [T, Dh]; nothing T x T is formed.
  auto bv = torch::matmul(fac.b, zero_padding(v, key_valid));
  return torch::matmul(fac.f, torch::matmul(landmark_pinv(fac.a, pinv_iterations, exact_inverse), bv));
}

torch::Tensor nystrom_attention_weights(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& key_valid,
                                        int64_t landmarks, int64_t pinv_iterations, bool exact_inverse) {
  auto fac = nystrom_factors(q, k, key_valid, landmarks);
  return torch::matmul(torch::matmul(fac.f, landmark_pinv(fac.a, pinv_iterations, exact_inverse)), fac.b);
}

torch::Tensor depthwise_conv_skip(const torch::Tensor& v, const torch::Tensor& key_valid, const torch::Tensor& weight) {
  TORCH_CHECK(v.dim() == 4, "depthwise_conv_skip: v must be [B, H, T, Dh], got ", v.sizes());
  check_qkv(v, "v", v, key_valid);
  TORCH_CHECK(weight.dim() == 4 && weight.size(0) == v.size(1) && weight.size(1) == 1 && weight.size(3) == 1,
              "depthwise_conv_skip: weight must be [H, 1, K, 1] with H = ", v.size(1), ", got ", weight.sizes());
  const int64_t kernel = weight.size(2);
  TORCH_CHECK(kernel % 2 == 1, "depthwise_conv_skip: the kernel must be odd (centred), got ", kernel);
  // Padded values are zeroed so that a real position near the end sees the same zeros as in batch 1.
  return torch::conv2d(zero_padding(v, key_valid), weight, /*bias=*/{}, /*stride=*/{1, 1},
                       /*padding=*/{kernel / 2, 0}, /*dilation=*/{1, 1}, /*groups=*/v.size(1));
}

void validate_nystrom(int64_t landmarks, int64_t pinv_iterations, int64_t conv_kernel) {
  if (landmarks < 1)
    throw ConfigError("key 'model.nystrom_landmarks': must be at least 1 (got " + std::to_string(landmarks) + ")");
  if (pinv_iterations < 1)
    throw ConfigError("key 'model.nystrom_pinv_iterations': must be at least 1 (got " +
                      std::to_string(pinv_iterations) + ")");
  if (conv_kernel < 0 || (conv_kernel != 0 && conv_kernel % 2 == 0))
    throw ConfigError("key 'model.nystrom_conv_kernel': must be 0 (no convolution skip) or an odd kernel size such "
                      "as 33 (got " + std::to_string(conv_kernel) + ")");
}

NystromSelfAttentionImpl::NystromSelfAttentionImpl(const MultiHeadAttentionOptions& options,
                                                   const NystromAttentionOptions& nystrom)
    : SelfAttentionImpl(options), nystrom_(nystrom) {
  validate_nystrom(nystrom.landmarks, nystrom.pinv_iterations, nystrom.conv_kernel);
  if (nystrom.conv_kernel > 0) {
    // Conv2d's default initialisation (uniform with bound 1/sqrt(fan_in), fan_in = kernel).
    const double bound = 1.0 / std::sqrt(static_cast<double>(nystrom.conv_kernel));
    nystrom_conv = register_parameter(
        "nystrom_conv", torch::empty({options.heads, 1, nystrom.conv_kernel, 1}).uniform_(-bound, bound));
  }
}

torch::Tensor NystromSelfAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                               const torch::Tensor& key_valid, bool causal, torch::Tensor* weights) {
  TORCH_CHECK(!causal, "nystrom attention cannot run causally (model.decoder_attention)");
  if (weights)
    *weights = nystrom_attention_weights(q, k, key_valid, nystrom_.landmarks, nystrom_.pinv_iterations);
  auto out = nystrom_attention(q, k, v, key_valid, nystrom_.landmarks, nystrom_.pinv_iterations);
  if (nystrom_conv.defined()) out = out + depthwise_conv_skip(v, key_valid, nystrom_conv.to(v.scalar_type()));
  return out;
}

torch::Tensor NystromSelfAttentionImpl::attend_step(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                                    SelfAttentionCache&, torch::Tensor*) {
  TORCH_CHECK(false, "self_attend_step: nystrom attention cannot decode");
  return {};
}

}  // namespace parla::nn

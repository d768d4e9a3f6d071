#include "nn/performer_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "core/error.h"
#include "runtime/torch_compat.h"
#include "nn/self_attention_cache.h"

namespace parla::nn {

// Helpers in a named namespace: the library is built in unity batches, where anonymous namespaces of different
// files share one translation unit.
namespace performer_impl {

// Causal attention runs in chunks of this many positions: quadratic inside a chunk, prefix sums across chunks.
constexpr int64_t kChunk = 64;

void check_projection(const torch::Tensor& x, const torch::Tensor& w) {
  TORCH_CHECK(w.defined() && (w.dim() == 2 || w.dim() == 3) && w.size(-1) == x.size(-1),
              "performer: the projection must be [m, Dh] or [H, m, Dh] with Dh = ", x.size(-1));
  if (w.dim() == 3) {
    TORCH_CHECK(x.dim() >= 3 && x.size(-3) == w.size(0),
                "performer: a per-head projection [H, m, Dh] needs x [..., H, T, Dh]");
  }
}

// log(phi(x) sqrt(m)) = x w^T - |x|^2/2, [..., T, m]. The 1/sqrt(m) of phi cancels in attention.
torch::Tensor log_features(const torch::Tensor& x, const torch::Tensor& w) {
  check_projection(x, w);
  auto wx = w.to(x.device(), x.scalar_type());
  return torch::matmul(x, wx.transpose(-2, -1)) - 0.5 * (x * x).sum(-1, /*keepdim=*/true);
}

// Headroom of the causal key constant: causal key features are at most e^60 (1e26), so that float32 sums over up
// to 1e12 of them (T m |v|) stay finite while features of keys up to 147 below the bound stay representable.
constexpr double kCausalHeadroom = 60.0;

// The causal key constant c = max_r |w_r|^2/2 - headroom (per head for [H, m, Dh]): w^T x - |x|^2/2 <= |w|^2/2
// for every x (equality at x = w), so exp(log phi - c) <= e^headroom without looking at any key.
torch::Tensor causal_key_shift(const torch::Tensor& w, const torch::Tensor& like) {
  auto wx = w.detach().to(like.device(), like.scalar_type());
  auto c = (wx * wx).sum(-1).amax(-1) * 0.5 - kCausalHeadroom;  // [] or [H]
  return w.dim() == 3 ? c.view({1, -1, 1, 1}) : c;
}

// Exponentials of log features need float32's exponent range and more than bfloat16's 8 mantissa bits (a log
// feature of 40 is off by up to 0.125 in bfloat16, its exp by 13%): half and bfloat16 inputs are computed in
// float32, with autocast off for their device type meanwhile (as nystrom_attention does), and results returned in
// the input dtype.
torch::Tensor widen(const torch::Tensor& x) {
  if (!x.defined()) return x;
  const auto t = x.scalar_type();
  return t == torch::kHalf || t == torch::kBFloat16 ? x.to(torch::kFloat) : x;
}

// Smallest positive normal number of the dtype: the normaliser guard's threshold (1/threshold is finite).
double smallest_normal(c10::ScalarType t) {
  if (t == torch::kDouble) return std::numeric_limits<double>::min();
  if (t == torch::kHalf) return 6.103515625e-05;  // 2^-14
  return std::numeric_limits<float>::min();        // float32 and bfloat16 share the exponent range
}

// A normaliser that is safe to divide by: itself where it is a normal positive number, else 1 (the row has no
// allowed key or all its features underflowed; its numerator is then ~0, so the row gives ~0). torch::where sends
// no gradient into the branch not taken, so no 1/0 reaches autograd.
torch::Tensor safe_normaliser(const torch::Tensor& den) {
  return torch::where(den > smallest_normal(den.scalar_type()), den, torch::ones_like(den));
}

struct Features {
  torch::Tensor q, k;  // [B, H, Tq, m], [B, H, Tk, m], stabilised as the header describes
};

Features stable_features(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& key_valid,
                         const torch::Tensor& w, bool causal) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && q.size(-1) == k.size(-1), "performer: q and k must be [B, H, T, Dh]");
  const double scale = std::pow(static_cast<double>(q.size(-1)), -0.25);  // exp(q.k / sqrt(Dh))
  auto uq = log_features(q * scale, w);
  auto fq = torch::exp(uq - uq.detach().amax(-1, /*keepdim=*/true));
  auto uk = log_features(k * scale, w);
  torch::Tensor invalid;  // [B, 1, Tk, 1], true = padding
  if (key_valid.defined()) {
    TORCH_CHECK(key_valid.dim() == 2 && key_valid.size(0) == k.size(0) && key_valid.size(1) == k.size(2),
                "performer: key_valid must be [B, Tk]");
    invalid = key_valid.to(k.device(), torch::kBool).logical_not().view({k.size(0), 1, k.size(2), 1});
  }
  torch::Tensor c;
  if (causal) {
    c = causal_key_shift(w, uk);
  } else {
    // The largest log feature over the real keys of each (row, head); 0 for a row without real keys.
    auto real = invalid.defined() ? uk.detach().masked_fill(invalid, -std::numeric_limits<double>::infinity())
                                  : uk.detach();
    c = real.amax({-2, -1}, /*keepdim=*/true);
    c = torch::where(torch::isfinite(c), c, torch::zeros_like(c));
  }
  auto shifted = uk - c;
  // -inf before exp, not a 0 after it: a padded key's feature may overflow, and inf * 0 would be NaN.
  if (invalid.defined()) shifted = shifted.masked_fill(invalid, -std::numeric_limits<double>::infinity());
  return {fq, torch::exp(shifted)};
}

// [B, H, T, E] -> [B, H, n, C, E], zero-padded at the end to n * C positions.
torch::Tensor to_chunks(const torch::Tensor& x, int64_t n, int64_t c) {
  const int64_t pad = n * c - x.size(2);
  auto p = pad > 0 ? torch::constant_pad_nd(x, {0, 0, 0, pad}) : x;
  return p.reshape({x.size(0), x.size(1), n, c, x.size(3)});
}

// Independent streams for the layers' random draws (splitmix64's increment).
uint64_t mix_seed(uint64_t seed, uint64_t salt) { return seed + 0x9E3779B97F4A7C15ULL * (salt + 1); }

}  // namespace performer_impl

torch::Tensor orthogonal_random_features(int64_t m, int64_t d, uint64_t seed, bool orthogonal) {
  TORCH_CHECK(m >= 1 && d >= 1, "orthogonal_random_features: m and d must be positive");
  auto gen = compat::make_generator(c10::Device(c10::DeviceType::CPU), seed);
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  if (!orthogonal) return torch::randn({m, d}, gen, opts).to(torch::kFloat32);
  std::vector<torch::Tensor> blocks;
  for (int64_t done = 0; done < m; done += d) {
    auto g = torch::randn({d, d}, gen, opts);
    auto qr = at::linalg_qr(g);
    auto r_diag = std::get<1>(qr).diagonal();
    // Q diag(sign(diag R)) is Haar-distributed (Mezzadri 2007); LAPACK's Q alone is not.
    auto signs = torch::where(r_diag < 0, -torch::ones_like(r_diag), torch::ones_like(r_diag));
    auto q = std::get<0>(qr) * signs.unsqueeze(0);
    // Row norms of an independent Gaussian matrix: chi with d degrees of freedom, as |N(0, I_d)|.
    auto norms = torch::randn({d, d}, gen, opts).pow(2).sum(1).sqrt();
    blocks.push_back((q * norms.unsqueeze(1)).narrow(0, 0, std::min(d, m - done)));
  }
  return torch::cat(blocks).to(torch::kFloat32).contiguous();
}

torch::Tensor favor_features(const torch::Tensor& x, const torch::Tensor& w) {
  return torch::exp(performer_impl::log_features(x, w)) / std::sqrt(static_cast<double>(w.size(-2)));
}

torch::Tensor performer_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& key_valid, const torch::Tensor& w, bool causal) {
  compat::AutocastOff no_autocast(q.device().type());
  const auto dtype = torch::promote_types(q.scalar_type(), v.scalar_type());
  auto f = performer_impl::stable_features(performer_impl::widen(q), performer_impl::widen(k), key_valid, w, causal);
  auto vw = performer_impl::widen(v);
  if (!causal) {
    auto kv = torch::matmul(f.k.transpose(-2, -1), vw);                 // [B,H,m,Dv]
    auto z = f.k.sum(-2).unsqueeze(-1);                                  // [B,H,m,1]
    return (torch::matmul(f.q, kv) / performer_impl::safe_normaliser(torch::matmul(f.q, z))).to(dtype);
  }
  const int64_t t = q.size(2);
  TORCH_CHECK(k.size(2) == t && v.size(2) == t, "causal performer attention needs as many queries as keys");
  const int64_t c = std::min(performer_impl::kChunk, t), n = (t + c - 1) / c;
  auto fq = performer_impl::to_chunks(f.q, n, c);  // [B,H,n,C,m]
  auto fk = performer_impl::to_chunks(f.k, n, c);
  auto vc = performer_impl::to_chunks(vw, n, c);   // [B,H,n,C,Dv]
  // Inside a chunk: the explicit causal weights (seed 002 eq. 15 with a triangle).
  auto tri = torch::ones({c, c}, fq.options()).tril();
  auto a = torch::matmul(fq, fk.transpose(-2, -1)) * tri;                // [B,H,n,C,C]
  auto num = torch::matmul(a, vc);                                        // [B,H,n,C,Dv]
  auto den = a.sum(-1, /*keepdim=*/true);                                 // [B,H,n,C,1]
  if (n > 1) {
    // Across chunks: the prefix sums of eq. 16 taken at chunk boundaries (exclusive: chunks before this one).
    auto kv = torch::matmul(fk.transpose(-2, -1), vc);                  // [B,H,n,m,Dv]
    auto zk = fk.sum(-2);                                                // [B,H,n,m]
    auto s_prev = torch::constant_pad_nd(kv.cumsum(2).narrow(2, 0, n - 1), {0, 0, 0, 0, 1, 0});
    auto z_prev = torch::constant_pad_nd(zk.cumsum(2).narrow(2, 0, n - 1), {0, 0, 1, 0});
    num = num + torch::matmul(fq, s_prev);
    den = den + torch::matmul(fq, z_prev.unsqueeze(-1));
  }
  auto out = (num / performer_impl::safe_normaliser(den)).reshape({q.size(0), q.size(1), n * c, v.size(3)});
  return (n * c > t ? out.narrow(2, 0, t) : out).to(dtype);
}

torch::Tensor performer_attention_weights(const torch::Tensor& q, const torch::Tensor& k,
                                          const torch::Tensor& key_valid, const torch::Tensor& w, bool causal) {
  compat::AutocastOff no_autocast(q.device().type());
  auto f = performer_impl::stable_features(performer_impl::widen(q), performer_impl::widen(k), key_valid, w, causal);
  auto a = torch::matmul(f.q, f.k.transpose(-2, -1));
  if (causal) {
    auto tq = q.size(-2), tk = k.size(-2);
    a = a * torch::ones({tq, tk}, a.options()).tril(tk - tq);
  }
  return (a / performer_impl::safe_normaliser(a.sum(-1, /*keepdim=*/true))).to(q.scalar_type());
}

torch::Tensor performer_attention_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& w, LinearAttentionState& state) {
  TORCH_CHECK(q.size(2) == 1 && k.size(2) == 1 && v.size(2) == 1, "performer_attention_step takes one position");
  compat::AutocastOff no_autocast(q.device().type());
  const auto dtype = torch::promote_types(q.scalar_type(), v.scalar_type());
  auto f = performer_impl::stable_features(performer_impl::widen(q), performer_impl::widen(k), {}, w, /*causal=*/true);
  auto kv = torch::matmul(f.k.transpose(-2, -1), performer_impl::widen(v));  // [B,H,m,Dv]
  auto zk = f.k.squeeze(-2);                                             // [B,H,m]
  state.s = state.s.defined() ? state.s + kv : kv;
  state.z = state.z.defined() ? state.z + zk : zk;
  auto num = torch::matmul(f.q, state.s);                                // [B,H,1,Dv]
  auto den = torch::matmul(f.q, state.z.unsqueeze(-1));                  // [B,H,1,1]
  return (num / performer_impl::safe_normaliser(den)).to(dtype);
}

bool performer_redraw_due(int64_t steps_done, int64_t redraw_every) {
  return redraw_every > 0 && steps_done > 0 && steps_done % redraw_every == 0;
}

void validate_performer(int64_t features, int64_t redraw_every) {
  if (features < 1)
    throw ConfigError("key 'model.performer_features': the number of random features must be >= 1, got " +
                      std::to_string(features));
  if (redraw_every < 0)
    throw ConfigError("key 'model.performer_redraw_every': must be >= 0 (0 = never redraw), got " +
                      std::to_string(redraw_every));
}

PerformerSelfAttentionImpl::PerformerSelfAttentionImpl(const MultiHeadAttentionOptions& options,
                                                       const PerformerAttentionOptions& performer)
    : SelfAttentionImpl(options), performer_(performer) {
  validate_performer(performer.features, performer.redraw_every);
  performer_features =
      register_buffer("performer_features", orthogonal_random_features(performer.features, head_dim_, options.seed));
  performer_passes = register_buffer("performer_passes", torch::zeros({}, torch::kInt64));
}

void PerformerSelfAttentionImpl::maybe_redraw_features() {
  if (!is_training() || performer_.redraw_every <= 0) return;
  torch::NoGradGuard no_grad;
  const int64_t passes = performer_passes.item<int64_t>();
  // Draw d is a function of (seed, d), so a resumed run redraws exactly what an uninterrupted one would.
  if (passes > 0 && passes % performer_.redraw_every == 0) {
    const auto draw = static_cast<uint64_t>(passes / performer_.redraw_every);
    performer_features.copy_(orthogonal_random_features(performer_.features, head_dim_,
                                                        performer_impl::mix_seed(options_.seed, draw)));
  }
  performer_passes.add_(1);
}

torch::Tensor PerformerSelfAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k,
                                                 const torch::Tensor& v, const torch::Tensor& key_valid, bool causal,
                                                 torch::Tensor* weights) {
  maybe_redraw_features();
  auto w = performer_features.to(q.scalar_type());
  if (weights) *weights = performer_attention_weights(q, k, key_valid, w, causal);
  return performer_attention(q, k, v, key_valid, w, causal);
}

torch::Tensor PerformerSelfAttentionImpl::attend_step(const torch::Tensor& q, const torch::Tensor& k,
                                                      const torch::Tensor& v, SelfAttentionCache& cache,
                                                      torch::Tensor* weights) {
  auto qh = split_heads(q), kh = split_heads(k), vh = split_heads(v);
  auto w = performer_features.to(qh.scalar_type());
  auto out = performer_attention_step(qh, kh, vh, w, LinearDecodingState::of(cache));
  if (weights) {
    // The recurrent state forgets the individual keys; keep them only when weights are wanted.
    cache.kv.append(step_heads(k), step_heads(v));
    *weights = performer_attention_weights(qh, cache.kv.gather().first, {}, w, false);
  }
  return merge_heads(out);
}

std::unique_ptr<VariantDecodingState> PerformerSelfAttentionImpl::new_decoding_state() const {
  return std::make_unique<LinearDecodingState>();
}

}  // namespace parla::nn

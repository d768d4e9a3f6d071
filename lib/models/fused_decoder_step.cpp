#include "models/fused_decoder_step.h"

#include <algorithm>
#include <vector>

#include <torch/torch.h>

// ATen's layer-norm kernel itself (what torch::layer_norm runs after allocating its three outputs), to write into
// the step's buffers with the modules' bits. Its dispatch stub's signature depends on which CPU kernels LibTorch was
// built with: on x86-64 every LibTorch (Debian's 1.13, the 2.x wheels) has AVX2 and AVX-512 ones, which these two
// macros of LibTorch's own build declare (a mismatch would fail to link, not misbehave). This file is kept out of
// unity batches so that no other file sees them. Elsewhere the step calls torch::layer_norm and copies.
#if defined(__x86_64__)
#define PARLA_ATEN_LAYER_NORM_KERNEL 1
#ifndef HAVE_AVX512_CPU_DEFINITION
#define HAVE_AVX512_CPU_DEFINITION
#endif
#ifndef HAVE_AVX2_CPU_DEFINITION
#define HAVE_AVX2_CPU_DEFINITION
#endif
#include <ATen/native/layer_norm.h>
#else
#define PARLA_ATEN_LAYER_NORM_KERNEL 0
#endif

#include "models/transformer_decoder.h"
#include "nn/full_attention.h"
#include "runtime/torch_compat.h"

namespace parla::models {

namespace {

// y [rows, out] = x [rows, in] W^T + b with whatever the layer multiplies with.
void linear(nn::LinearImpl& l, const float* x, int64_t rows, float* y) {
  const float* bias = l.bias.defined() ? l.bias.data_ptr<float>() : nullptr;
  if (const auto* m = l.int8()) return nn::int8_linear(x, rows, *m, bias, y);
  if (const auto* m = l.packed()) return nn::packed_linear(x, rows, *m, bias, y);
  // What torch::linear does for a contiguous [N, 1, in] input (one addmm over the flattened rows), into y.
  const int64_t in = l.weight.size(1), out = l.weight.size(0);
  auto yt = torch::from_blob(y, {rows, out}, torch::kFloat);
  auto xt = torch::from_blob(const_cast<float*>(x), {rows, in}, torch::kFloat);
  if (l.bias.defined())
    at::addmm_out(yt, l.bias, xt, l.weight.t());
  else
    at::mm_out(yt, xt, l.weight.t());
}

bool linear_supported(const nn::LinearImpl& l) {
  if (l.bias.defined() && (l.bias.scalar_type() != torch::kFloat || !l.bias.device().is_cpu() ||
                           !l.bias.is_contiguous()))
    return false;
  if (const auto* m = l.int8()) return !m->fallback.defined() && m->packed != nullptr;
  if (l.packed()) return true;
  return l.weight.scalar_type() == torch::kFloat && l.weight.device().is_cpu();
}

bool norm_supported(const torch::nn::LayerNormImpl& n) {
  auto ok = [](const torch::Tensor& t) {
    return t.defined() && t.scalar_type() == torch::kFloat && t.device().is_cpu() && t.is_contiguous();
  };
  return n.options.elementwise_affine() && ok(n.weight) && ok(n.bias) && n.options.normalized_shape().size() == 1;
}

// The buffers of one step, views over cache.workspace made once per step: LayerNorm's kernel takes tensors.
struct Buffers {
  float *h, *t, *o, *wide;  // [N, D] residual stream, [N, D] and [N, D] scratch, [N, max(3D, ffn)]
  torch::Tensor h_t, t_t, o_t, mean, rstd;
};

// What nn::LayerNorm computes (ATen's own kernel, as torch::layer_norm calls it), from x into y.
void layer_norm(torch::nn::LayerNormImpl& n, const torch::Tensor& x, torch::Tensor& y, Buffers& b, int64_t rows,
                int64_t d) {
#if PARLA_ATEN_LAYER_NORM_KERNEL
  at::native::LayerNormKernel(at::kCPU, x, n.weight, n.bias, rows, d, n.options.eps(), &y, &b.mean, &b.rstd);
#else
  y.copy_(torch::layer_norm(x, {d}, n.weight, n.bias, n.options.eps()));
  (void)b;
  (void)rows;
#endif
}

void add_into(float* y, const float* a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + y[i];
}

void activate(Activation activation, float* x, int64_t rows, int64_t cols) {
  if (activation == Activation::kRelu) {
    // As ATen's clamp_min(x, 0): NaN and -0 stay as they are.
    for (int64_t i = 0; i < rows * cols; ++i) x[i] = x[i] < 0.0f ? 0.0f : x[i];
    return;
  }
  auto t = torch::from_blob(x, {rows, cols}, torch::kFloat);
  if (activation == Activation::kGelu)
    at::gelu_(t);
  else
    at::silu_(t);
}

}  // namespace

bool fused_step_supported(const TransformerDecoderImpl& decoder) {
  if (decoder.final_norm && !norm_supported(*decoder.final_norm)) return false;
  for (size_t i = 0; i < decoder.layers->size(); ++i) {
    const auto& layer = *decoder.layers->ptr<TransformerDecoderLayerImpl>(i);
    const auto* self = dynamic_cast<const nn::FullSelfAttentionImpl*>(layer.self_attn.get());
    if (!self) return false;
    for (const nn::LinearImpl* l : {self->qkv_proj.get(), self->out_proj.get(), layer.cross_attn->q_proj.get(),
                                    layer.cross_attn->out_proj.get(), layer.ffn->fc1.get(), layer.ffn->fc2.get()})
      if (!linear_supported(*l)) return false;
    for (const auto* n : {layer.self_attn_norm.get(), layer.cross_attn_norm.get(), layer.ffn_norm.get()})
      if (!norm_supported(*n)) return false;
  }
  return decoder.layers->size() > 0;
}

bool fused_step_applies(const TransformerDecoderImpl& decoder, const torch::Tensor& x) {
  return x.dim() == 3 && x.size(1) == 1 && x.device().is_cpu() && x.scalar_type() == torch::kFloat &&
         !decoder.is_training() && !torch::GradMode::is_enabled() && !compat::autocast_enabled(c10::DeviceType::CPU) &&
         fused_step_supported(decoder);
}

torch::Tensor fused_decoder_step(TransformerDecoderImpl& decoder, const torch::Tensor& x,
                                 TransformerDecoderCache& cache, const torch::Tensor& memory_valid) {
  const int64_t N = x.size(0), D = x.size(2), L = static_cast<int64_t>(decoder.layers->size());
  TORCH_CHECK(static_cast<int64_t>(cache.self.size()) == L && static_cast<int64_t>(cache.cross_k.size()) == L,
              "fused_decoder_step: the cache has ", cache.self.size(), " layers, the decoder ", L);
  int64_t wide = 3 * D;
  for (int64_t i = 0; i < L; ++i)
    wide = std::max(wide, decoder.layers->ptr<TransformerDecoderLayerImpl>(i)->ffn->fc1->weight.size(0));
  auto& ws = cache.workspace;
  const size_t need = static_cast<size_t>(N * (3 * D + wide + 2));
  if (ws.size() < need) ws.resize(need);
  Buffers b;
  b.h = ws.data();
  b.t = b.h + N * D;
  b.o = b.t + N * D;
  b.wide = b.o + N * D;
  float* stats = b.wide + N * wide;
  b.h_t = torch::from_blob(b.h, {N, D}, torch::kFloat);
  b.t_t = torch::from_blob(b.t, {N, D}, torch::kFloat);
  b.o_t = torch::from_blob(b.o, {N, D}, torch::kFloat);
  b.mean = torch::from_blob(stats, {N}, torch::kFloat);
  b.rstd = torch::from_blob(stats + N, {N}, torch::kFloat);
  {
    auto xc = x.contiguous();
    std::copy(xc.data_ptr<float>(), xc.data_ptr<float>() + N * D, b.h);
  }
  torch::Tensor valid;
  if (memory_valid.defined()) valid = memory_valid.to(torch::kBool).contiguous();

  for (int64_t i = 0; i < L; ++i) {
    auto& layer = *decoder.layers->ptr<TransformerDecoderLayerImpl>(i);
    auto& self = dynamic_cast<nn::FullSelfAttentionImpl&>(*layer.self_attn);
    auto& cross = *layer.cross_attn;
    auto& ffn = *layer.ffn;
    const bool pre = layer.pre_norm();
    const int64_t H = self.options().heads, Dh = D / H, F = ffn.fc1->weight.size(0);
    auto& sc = cache.self[static_cast<size_t>(i)];

    // A sublayer's input: h itself (post-norm) or its norm in t (pre-norm).
    auto input = [&](torch::nn::LayerNormImpl& norm) {
      if (!pre) return b.h;
      layer_norm(norm, b.h_t, b.t_t, b, N, D);
      return b.t;
    };
    // The sublayer's output o joins the residual stream h: h + o (pre-norm), or norm(h + o) back into h
    // (post-norm); the modules' order of operands (a sum either way).
    auto residual = [&](torch::nn::LayerNormImpl& norm) {
      if (pre) {
        add_into(b.h, b.o, N * D);
      } else {
        add_into(b.o, b.h, N * D);
        layer_norm(norm, b.o_t, b.h_t, b, N, D);
      }
    };

    // Self-attention over the cache: qkv [N, 3D] in `wide`; k and v appended as [N, H, Dh] views of it.
    linear(*self.qkv_proj, input(*layer.self_attn_norm), N, b.wide);
    sc.length += 1;
    sc.kv.append(torch::from_blob(b.wide + D, {N, H, Dh}, {3 * D, Dh, 1}, torch::kFloat),
                 torch::from_blob(b.wide + 2 * D, {N, H, Dh}, {3 * D, Dh, 1}, torch::kFloat));
    nn::attend_cache(b.wide, 3 * D, sc.kv, b.t);
    linear(*self.out_proj, b.t, N, b.o);
    residual(*layer.self_attn_norm);

    // Cross-attention over the encoder output.
    linear(*cross.q_proj, input(*layer.cross_attn_norm), N, b.o);
    const auto& k = cache.cross_k[static_cast<size_t>(i)];
    const auto& v = cache.cross_v[static_cast<size_t>(i)];
    nn::attend_memory(b.o, D, N, k.stride(3) == 1 ? k : k.contiguous(), v.stride(3) == 1 ? v : v.contiguous(), valid,
                      b.t, cache.memory_rows);
    linear(*cross.out_proj, b.t, N, b.o);
    residual(*layer.cross_attn_norm);

    // Feed-forward.
    linear(*ffn.fc1, input(*layer.ffn_norm), N, b.wide);
    activate(ffn.activation(), b.wide, N, F);
    linear(*ffn.fc2, b.wide, N, b.o);
    residual(*layer.ffn_norm);
  }
  auto out = torch::empty({N, 1, D}, torch::kFloat);
  if (decoder.final_norm) {
    auto y = out.view({N, D});
    layer_norm(*decoder.final_norm, b.h_t, y, b, N, D);
  } else {
    std::copy(b.h, b.h + N * D, out.data_ptr<float>());
  }
  return out;
}

}  // namespace parla::models

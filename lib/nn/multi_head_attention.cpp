#include "nn/multi_head_attention.h"

#include <torch/torch.h>

#include "core/error.h"
#include "core/torch_compat.h"
#include "nn/attention_masks.h"
#include "nn/attention_scores.h"
#include "nn/masked_softmax.h"

namespace parla::nn {

AttentionKind parse_attention_kind(const std::string& name) {
  if (name == "full") return AttentionKind::kFull;
  if (name == "local") return AttentionKind::kLocal;
  if (name == "linear") return AttentionKind::kLinear;
  throw ConfigError("key 'model.attention': unknown attention '" + name + "' (must be one of: full, local, linear)");
}

void SelfAttentionCache::reorder(const torch::Tensor& indices) {
  kv.reorder(indices);
  if (linear.s.defined()) linear.s = linear.s.index_select(0, indices);
  if (linear.z.defined()) linear.z = linear.z.index_select(0, indices);
}

void SelfAttentionCache::add_rows(int64_t count) {
  kv.add_rows(count);
  // Linear attention's running sums start at zero for a new row, and 0 + x == x: the same sums as alone.
  auto grow = [&](torch::Tensor& t) {
    if (!t.defined() || count <= 0) return;
    auto shape = t.sizes().vec();
    shape[0] = count;
    t = torch::cat({t, torch::zeros(shape, t.options())});
  };
  grow(linear.s);
  grow(linear.z);
}

void SelfAttentionCache::rebase(int64_t position) {
  position = std::min(position, length);
  if (position <= 0) return;
  kv.rebase(position);
  length -= position;
}

MultiHeadAttentionImpl::MultiHeadAttentionImpl(const MultiHeadAttentionOptions& options) : options_(options) {
  const int64_t d = options.d_model;
  if (options.heads < 1 || d % options.heads != 0)
    throw ConfigError("key 'model.heads': d_model " + std::to_string(d) + " is not divisible by " +
                      std::to_string(options.heads) + " heads");
  head_dim_ = d / options.heads;
  // Xavier uniform per projection matrix (as fairseq); the fused matrices are initialised block by block so
  // each block has the fan of a [D, D] matrix.
  auto xavier_blocks = [d](torch::Tensor w) {
    torch::NoGradGuard g;
    for (int64_t i = 0; i < w.size(0) / d; ++i) {
      auto block = w.narrow(0, i * d, d);
      torch::nn::init::xavier_uniform_(block);
    }
  };
  if (options.self_attention) {
    qkv_proj = register_module("qkv_proj", Linear(d, 3 * d));
    xavier_blocks(qkv_proj->weight);
    torch::nn::init::zeros_(qkv_proj->bias);
  } else {
    q_proj = register_module("q_proj", Linear(d, d));
    kv_proj = register_module("kv_proj", Linear(d, 2 * d));
    xavier_blocks(q_proj->weight);
    xavier_blocks(kv_proj->weight);
    torch::nn::init::zeros_(q_proj->bias);
    torch::nn::init::zeros_(kv_proj->bias);
  }
  out_proj = register_module("out_proj", Linear(d, d));
  torch::nn::init::xavier_uniform_(out_proj->weight);
  torch::nn::init::zeros_(out_proj->bias);
}

torch::Tensor MultiHeadAttentionImpl::split_heads(const torch::Tensor& x) const {
  return x.view({x.size(0), x.size(1), options_.heads, head_dim_}).transpose(1, 2);
}

torch::Tensor MultiHeadAttentionImpl::merge_heads(const torch::Tensor& x) const {
  return x.transpose(1, 2).reshape({x.size(0), x.size(2), options_.d_model});
}

torch::Tensor MultiHeadAttentionImpl::softmax_attention(const torch::Tensor& q, const torch::Tensor& k,
                                                        const torch::Tensor& v, const torch::Tensor& allowed,
                                                        torch::Tensor* weights) {
  auto w = masked_softmax(scaled_dot_scores(q, k), allowed);  // Eq. 1
  if (weights) *weights = w;
  if (options_.dropout > 0 && is_training()) w = torch::dropout(w, options_.dropout, true);
  return torch::matmul(w, v);
}

torch::Tensor MultiHeadAttentionImpl::fused_attention(const torch::Tensor& q, const torch::Tensor& k,
                                                      const torch::Tensor& v, const torch::Tensor& allowed,
                                                      bool is_causal) {
  if (!compat::has_fused_attention()) return {};
  const double p = options_.dropout > 0 && is_training() ? options_.dropout : 0.0;
  if (!allowed.defined()) return compat::scaled_dot_product_attention(q, k, v, {}, p, is_causal);
  // A query row without any allowed key: the explicit path (masked_softmax) gives zero weights, hence a zero
  // output, where SDPA gives NaN (and NaN gradients). Such a row attends to every key here, finitely, and its
  // output is then zeroed, which also zeroes the gradient flowing into it.
  auto has_key = allowed.any(-1, /*keepdim=*/true);
  auto out = compat::scaled_dot_product_attention(q, k, v, allowed.logical_or(has_key.logical_not()), p, false);
  return out.masked_fill(has_key.logical_not(), 0.0);
}

torch::Tensor MultiHeadAttentionImpl::self_attend(const torch::Tensor& x, const torch::Tensor& key_valid, bool causal,
                                                  torch::Tensor* weights) {
  TORCH_CHECK(options_.self_attention, "self_attend on a cross-attention module");
  const int64_t t = x.size(1);
  auto qkv = qkv_proj(x).chunk(3, -1);
  auto q = split_heads(qkv[0]), k = split_heads(qkv[1]), v = split_heads(qkv[2]);
  torch::Tensor out;
  if (options_.kind == AttentionKind::kLinear) {
    out = linear_attention(q, k, v, key_valid, causal);
    if (weights) *weights = linear_attention_weights(q, k, key_valid, causal);
  } else {
    torch::Tensor allowed;
    if (key_valid.defined()) allowed = key_valid.unsqueeze(1).unsqueeze(2);
    // Fused kernel (LibTorch 2): full attention whose weights nobody asked for. A causal mask alone goes as
    // is_causal, which lets the kernel skip the masked blocks instead of reading a [T, T] mask.
    if (options_.kind == AttentionKind::kFull && !weights)
      out = fused_attention(
          q, k, v, causal && allowed.defined() ? combine_masks(allowed, causal_mask(t, t).to(x.device())) : allowed,
          causal && !allowed.defined());
    if (!out.defined()) {
      if (options_.kind == AttentionKind::kLocal)
        allowed = combine_masks(allowed, local_mask(t, t, options_.window, causal).to(x.device()));
      else if (causal)
        allowed = combine_masks(allowed, causal_mask(t, t).to(x.device()));
      out = softmax_attention(q, k, v, allowed, weights);
    }
  }
  return out_proj(merge_heads(out));
}

bool MultiHeadAttentionImpl::inference(const torch::Tensor& t) const {
  return !(torch::GradMode::is_enabled() && t.requires_grad()) && !(options_.dropout > 0 && is_training());
}

torch::Tensor MultiHeadAttentionImpl::self_attend_step(const torch::Tensor& x, SelfAttentionCache& cache,
                                                       torch::Tensor* weights) {
  TORCH_CHECK(options_.self_attention, "self_attend_step on a cross-attention module");
  const int64_t N = x.size(0);
  auto qkv = qkv_proj(x).chunk(3, -1);
  auto heads = [&](const torch::Tensor& t) { return t.reshape({N, options_.heads, head_dim_}); };
  cache.length += 1;
  if (options_.kind == AttentionKind::kLinear) {
    auto q = split_heads(qkv[0]), k = split_heads(qkv[1]), v = split_heads(qkv[2]);
    auto out = linear_attention_step(q, k, v, cache.linear);
    if (weights) {
      // The recurrent state forgets the individual keys; keep them only when weights are wanted.
      cache.kv.append(heads(qkv[1]), heads(qkv[2]));
      *weights = linear_attention_weights(q, cache.kv.gather().first, {}, false);
    }
    return out_proj(merge_heads(out));
  }
  cache.kv.append(heads(qkv[1]), heads(qkv[2]));
  // Positions older than the window can never be attended again: keep only the last window+1.
  if (options_.kind == AttentionKind::kLocal) cache.kv.drop_before(cache.kv.length() - (options_.window + 1));
  auto q = heads(qkv[0]);
  if (!inference(q)) {
    TORCH_CHECK(!cache.kv.row_first().defined(), "rows that joined a running batch are decoded without autograd only");
    auto [k, v] = cache.kv.gather();
    return out_proj(merge_heads(softmax_attention(q.unsqueeze(2), k, v, {}, weights)));
  }
  torch::Tensor w;
  auto out = attend_cache(q, cache.kv, weights ? &w : nullptr);  // [N, H, Dh] = [N, D]
  if (weights) *weights = w.unsqueeze(2);
  return out_proj(out.view({N, 1, options_.d_model}));
}

std::pair<torch::Tensor, torch::Tensor> MultiHeadAttentionImpl::project_memory(const torch::Tensor& memory) {
  TORCH_CHECK(!options_.self_attention, "project_memory on a self-attention module");
  auto kv = kv_proj(memory).chunk(2, -1);
  return {split_heads(kv[0]), split_heads(kv[1])};
}

torch::Tensor MultiHeadAttentionImpl::cross_attend(const torch::Tensor& x, const torch::Tensor& k,
                                                   const torch::Tensor& v, const torch::Tensor& key_valid,
                                                   torch::Tensor* weights) {
  auto projected = q_proj(x);
  if (x.size(1) == 1 && inference(projected)) {
    const int64_t B = x.size(0);
    torch::Tensor w;
    auto out = attend_memory(projected.view({B, options_.heads, head_dim_}), k, v, key_valid, weights ? &w : nullptr);
    if (weights) *weights = w.unsqueeze(2);
    return out_proj(out.view({B, 1, options_.d_model}));
  }
  auto q = split_heads(projected);  // [B, H, T, Dh]
  torch::Tensor allowed;
  if (key_valid.defined()) allowed = key_valid.unsqueeze(1).unsqueeze(2);
  const int64_t B = q.size(0), M = k.size(0), H = q.size(1), T = q.size(2);
  if (M == B) {
    torch::Tensor out;
    if (options_.kind == AttentionKind::kFull && !weights) out = fused_attention(q, k, v, allowed, false);
    if (!out.defined()) out = softmax_attention(q, k, v, allowed, weights);
    return out_proj(merge_heads(out));
  }
  TORCH_CHECK(M > 0 && B % M == 0, "cross_attend: ", B, " query rows for ", M, " memory rows");
  const int64_t G = B / M;
  // [M*G, H, T, Dh] -> [M, H, G*T, Dh]: a group's queries become extra query positions of its memory row.
  auto grouped = q.view({M, G, H, T, head_dim_}).permute({0, 2, 1, 3, 4}).reshape({M, H, G * T, head_dim_});
  auto out = softmax_attention(grouped, k, v, allowed, weights);
  auto ungroup = [&](const torch::Tensor& t) {
    return t.view({M, H, G, T, t.size(-1)}).permute({0, 2, 1, 3, 4}).reshape({B, H, T, t.size(-1)});
  };
  if (weights) *weights = ungroup(*weights);
  return out_proj(merge_heads(ungroup(out)));
}

}  // namespace parla::nn

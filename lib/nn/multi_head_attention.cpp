#include "nn/multi_head_attention.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "core/error.h"
#include "core/torch_compat.h"
#include "nn/attention_masks.h"
#include "nn/attention_scores.h"
#include "nn/masked_softmax.h"
#include "nn/nystrom_attention.h"
#include "nn/performer_attention.h"
#include "nn/routing_attention.h"

namespace parla::nn {

AttentionKind parse_attention_kind(const std::string& name) {
  if (name == "full") return AttentionKind::kFull;
  if (name == "local") return AttentionKind::kLocal;
  if (name == "linear") return AttentionKind::kLinear;
  if (name == "sparse") return AttentionKind::kSparse;
  if (name == "routing") return AttentionKind::kRouting;
  if (name == "performer") return AttentionKind::kPerformer;
  if (name == "nystrom") return AttentionKind::kNystrom;
  throw ConfigError("key 'model.attention': unknown attention '" + name +
                    "' (must be one of: full, local, linear, sparse, routing, performer, nystrom)");
}

bool attention_kind_is_causal(AttentionKind kind) { return kind != AttentionKind::kNystrom; }

SparsePattern local_pattern(int64_t window) {
  SparsePattern p;
  p.band = true;
  p.window = window;
  // Blocks as wide as the window: each query block gathers its own and its two neighbours (3 blocks).
  p.block_size = std::max<int64_t>(16, window);
  return p;
}

namespace {

// Independent streams for the layers' random draws (splitmix64's increment).
uint64_t mix_seed(uint64_t seed, uint64_t salt) { return seed + 0x9E3779B97F4A7C15ULL * (salt + 1); }

}  // namespace

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

  // Each variant's own state exists only where it is chosen, so other checkpoints keep their tensors.
  switch (options.kind) {
    case AttentionKind::kSparse:
      validate(options.sparse);
      break;
    case AttentionKind::kRouting: {
      validate_routing(options.routing_clusters, options.routing_decay);
      auto st = init_routing_centroids(options.heads, options.routing_clusters, head_dim_, options.seed);
      routing_centroids = register_buffer("routing_centroids", st.centroids);
      routing_sums = register_buffer("routing_sums", st.sums);
      routing_counts = register_buffer("routing_counts", st.counts);
      break;
    }
    case AttentionKind::kPerformer:
      validate_performer(options.performer_features, options.performer_redraw_every);
      performer_features = register_buffer(
          "performer_features", orthogonal_random_features(options.performer_features, head_dim_, options.seed));
      performer_passes = register_buffer("performer_passes", torch::zeros({}, torch::kInt64));
      break;
    case AttentionKind::kNystrom:
      validate_nystrom(options.nystrom_landmarks, options.nystrom_pinv_iterations, options.nystrom_conv_kernel);
      if (options.nystrom_conv_kernel > 0) {
        // Conv2d's default initialisation (uniform with bound 1/sqrt(fan_in), fan_in = kernel).
        const double bound = 1.0 / std::sqrt(static_cast<double>(options.nystrom_conv_kernel));
        nystrom_conv = register_parameter(
            "nystrom_conv", torch::empty({options.heads, 1, options.nystrom_conv_kernel, 1}).uniform_(-bound, bound));
      }
      break;
    default:
      break;
  }
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
  } else if (options_.kind != AttentionKind::kFull) {
    out = efficient_attention(q, k, v, key_valid, causal, weights);
  } else {
    torch::Tensor allowed;
    if (key_valid.defined()) allowed = key_valid.unsqueeze(1).unsqueeze(2);
    // Fused kernel (LibTorch 2): full attention whose weights nobody asked for. A causal mask alone goes as
    // is_causal, which lets the kernel skip the masked blocks instead of reading a [T, T] mask.
    if (!weights)
      out = fused_attention(
          q, k, v, causal && allowed.defined() ? combine_masks(allowed, causal_mask(t, t).to(x.device())) : allowed,
          causal && !allowed.defined());
    if (!out.defined()) {
      if (causal) allowed = combine_masks(allowed, causal_mask(t, t).to(x.device()));
      out = softmax_attention(q, k, v, allowed, weights);
    }
  }
  return out_proj(merge_heads(out));
}

void MultiHeadAttentionImpl::maybe_redraw_features() {
  if (!is_training() || options_.performer_redraw_every <= 0) return;
  torch::NoGradGuard no_grad;
  const int64_t passes = performer_passes.item<int64_t>();
  // Draw d is a function of (seed, d), so a resumed run redraws exactly what an uninterrupted one would.
  if (passes > 0 && passes % options_.performer_redraw_every == 0) {
    const auto draw = static_cast<uint64_t>(passes / options_.performer_redraw_every);
    performer_features.copy_(
        orthogonal_random_features(options_.performer_features, head_dim_, mix_seed(options_.seed, draw)));
  }
  performer_passes.add_(1);
}

torch::Tensor MultiHeadAttentionImpl::efficient_attention(const torch::Tensor& q, const torch::Tensor& k,
                                                          const torch::Tensor& v, const torch::Tensor& key_valid,
                                                          bool causal, torch::Tensor* weights) {
  const double dropout = options_.dropout > 0 && is_training() ? options_.dropout : 0.0;
  switch (options_.kind) {
    case AttentionKind::kLocal:
      return sparse_attention(q, k, v, key_valid, local_pattern(options_.window), causal, dropout, is_training(),
                              weights);
    case AttentionKind::kSparse:
      return sparse_attention(q, k, v, key_valid, options_.sparse, causal, dropout, is_training(), weights);
    case AttentionKind::kPerformer: {
      maybe_redraw_features();
      auto w = performer_features.to(q.scalar_type());
      if (weights) *weights = performer_attention_weights(q, k, key_valid, w, causal);
      return performer_attention(q, k, v, key_valid, w, causal);
    }
    case AttentionKind::kRouting: {
      auto centroids = routing_centroids.to(q.scalar_type());
      auto out = causal ? routing_attention_causal(q, k, v, key_valid, centroids, weights)
                        : routing_attention_balanced(q, k, v, key_valid, centroids, weights);
      if (is_training()) {
        // Centroids follow the batch's queries and keys (eqs. 8-10) after they routed it; no gradient.
        torch::NoGradGuard no_grad;
        RoutingCentroids st{routing_centroids.clone(), routing_sums.clone(), routing_counts.clone()};
        routing_ema_update(st, q.detach().to(torch::kFloat), k.detach().to(torch::kFloat), key_valid,
                           options_.routing_decay);
        routing_centroids.copy_(st.centroids);
        routing_sums.copy_(st.sums);
        routing_counts.copy_(st.counts);
      }
      return out;
    }
    case AttentionKind::kNystrom: {
      TORCH_CHECK(!causal, "nystrom attention cannot run causally (model.decoder_attention)");
      if (weights)
        *weights = nystrom_attention_weights(q, k, key_valid, options_.nystrom_landmarks,
                                             options_.nystrom_pinv_iterations);
      auto out = nystrom_attention(q, k, v, key_valid, options_.nystrom_landmarks, options_.nystrom_pinv_iterations);
      if (nystrom_conv.defined()) out = out + depthwise_conv_skip(v, key_valid, nystrom_conv.to(v.scalar_type()));
      return out;
    }
    default:
      TORCH_CHECK(false, "efficient_attention: not an efficient variant");
  }
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
  if (options_.kind == AttentionKind::kLinear || options_.kind == AttentionKind::kPerformer) {
    auto q = split_heads(qkv[0]), k = split_heads(qkv[1]), v = split_heads(qkv[2]);
    const bool performer = options_.kind == AttentionKind::kPerformer;
    torch::Tensor w;
    if (performer) w = performer_features.to(q.scalar_type());
    auto out = performer ? performer_attention_step(q, k, v, w, cache.linear) : linear_attention_step(q, k, v, cache.linear);
    if (weights) {
      // The recurrent state forgets the individual keys; keep them only when weights are wanted.
      cache.kv.append(heads(qkv[1]), heads(qkv[2]));
      auto keys = cache.kv.gather().first;
      *weights = performer ? performer_attention_weights(q, keys, {}, w, false)
                           : linear_attention_weights(q, keys, {}, false);
    }
    return out_proj(merge_heads(out));
  }
  TORCH_CHECK(attention_kind_is_causal(options_.kind), "self_attend_step: nystrom attention cannot decode");
  cache.kv.append(heads(qkv[1]), heads(qkv[2]));
  if (options_.kind == AttentionKind::kSparse || options_.kind == AttentionKind::kRouting)
    return masked_cache_step(heads(qkv[0]), cache, weights);
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

torch::Tensor MultiHeadAttentionImpl::masked_cache_step(const torch::Tensor& q, SelfAttentionCache& cache,
                                                        torch::Tensor* weights) {
  // The patterns reach arbitrarily far back (global tokens, random blocks, clusters): the whole cache is read,
  // and the newest query's allowed keys are one mask row. Rows that joined a running batch (continuous
  // batching) count their positions from their own first one.
  auto [k, v] = cache.kv.gather();  // [N, H, L, Dh] for positions first .. length - 1
  const int64_t N = q.size(0), L = k.size(2), first = cache.kv.first(), length = cache.kv.length();
  std::vector<int64_t> start(N, first);
  if (cache.kv.row_first().defined()) {
    auto rf = cache.kv.row_first().to(torch::kCPU).contiguous();
    for (int64_t n = 0; n < N; ++n) start[n] = std::max(first, rf.data_ptr<int64_t>()[n]);
  }
  bool same_start = std::all_of(start.begin(), start.end(), [&](int64_t s) { return s == start[0]; });
  const int64_t rows = same_start ? 1 : N;  // one mask row serves every row when they all started together
  auto own = torch::zeros({rows, L}, torch::kBool);  // positions that belong to the row
  for (int64_t n = 0; n < rows; ++n) own[n].narrow(0, start[n] - first, length - start[n]).fill_(true);
  torch::Tensor allowed;
  if (options_.kind == AttentionKind::kSparse) {
    auto pattern = torch::zeros({rows, L}, torch::kBool);
    for (int64_t n = 0; n < rows; ++n) {
      const int64_t pos = length - 1 - start[n];
      pattern[n].narrow(0, start[n] - first, pos + 1).copy_(sparse_pattern_row(pos, pos + 1, options_.sparse, true));
    }
    allowed = pattern.view({rows, 1, 1, L}).to(q.device());
  } else {
    auto centroids = routing_centroids.to(q.scalar_type());
    auto key_clusters = nearest_centroid(k, centroids);                            // [N, H, L]
    auto query_cluster = nearest_centroid(q.unsqueeze(2), centroids).squeeze(2);  // [N, H]
    allowed = routing_causal_row(query_cluster, key_clusters)
                  .logical_and(own.to(q.device()).unsqueeze(1))
                  .unsqueeze(2);  // [N, H, 1, L]
  }
  auto out = softmax_attention(q.unsqueeze(2), k, v, allowed, weights);  // [N, H, 1, Dh]
  return out_proj(merge_heads(out));
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

#include "nn/routing_attention.h"

#include <cmath>
#include <limits>
#include <sstream>

#include <torch/torch.h>

#include "core/error.h"
#include "runtime/torch_compat.h"
#include "nn/attention_masks.h"
#include "nn/attention_scores.h"
#include "nn/masked_softmax.h"
#include "nn/self_attention_cache.h"

namespace parla::nn {

namespace {

// Below this norm a vector has no direction; dividing by the floor keeps it (near) zero instead of NaN.
constexpr double kNormFloor = 1e-12;
// Below this EMA count a centroid is left as it is (see apply_routing_ema).
constexpr double kMinCount = 1e-12;

torch::Tensor unit(const torch::Tensor& x) {
  return x / x.pow(2).sum(-1, /*keepdim=*/true).sqrt().clamp_min(kNormFloor);
}

// Cosine similarity of every vector of x [..., H, T, Dh] with every centroid [H, K, Dh] -> [..., H, T, K], in the
// wider of the two dtypes and without gradient: it only decides the routing.
torch::Tensor cosine_to_centroids(const torch::Tensor& x, const torch::Tensor& centroids) {
  torch::NoGradGuard no_grad;
  TORCH_CHECK(x.dim() >= 3 && centroids.dim() == 3 && x.size(-3) == centroids.size(0) &&
                  x.size(-1) == centroids.size(2),
              "routing: vectors [..., H, T, Dh] and centroids [H, K, Dh] disagree");
  const auto type = at::promote_types(x.scalar_type(), centroids.scalar_type());
  auto mu = unit(centroids.detach().to(x.device(), type));
  return torch::matmul(unit(x.detach().to(type)), mu.transpose(-2, -1));
}

void check_attention_shapes(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const torch::Tensor& key_valid, const char* what) {
  TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes() && v.dim() == 4 && v.size(0) == q.size(0) &&
                  v.size(1) == q.size(1) && v.size(2) == q.size(2),
              what, ": self-attention needs q, k [B, H, T, Dh] and v [B, H, T, Dv]");
  TORCH_CHECK(!key_valid.defined() || (key_valid.dim() == 2 && key_valid.size(0) == q.size(0) &&
                                       key_valid.size(1) == q.size(2)),
              what, ": key_valid must be [B, T]");
}

}  // namespace

void validate_routing(int64_t clusters, double decay) {
  if (clusters < 1)
    throw ConfigError("key 'model.routing_clusters': the number of routing clusters must be at least 1, got " +
                      std::to_string(clusters));
  if (!(decay > 0.0 && decay < 1.0)) {  // also rejects NaN
    std::ostringstream s;
    s << "key 'model.routing_decay': the centroids' moving-average decay must lie strictly between 0 and 1, got "
      << decay;
    throw ConfigError(s.str());
  }
}

torch::Tensor nearest_centroid(const torch::Tensor& x, const torch::Tensor& centroids) {
  return cosine_to_centroids(x, centroids).argmax(-1);
}

RoutingCentroids init_routing_centroids(int64_t heads, int64_t clusters, int64_t head_dim, uint64_t seed,
                                        const torch::TensorOptions& options) {
  TORCH_CHECK(heads >= 1 && clusters >= 1 && head_dim >= 1, "init_routing_centroids: empty shape");
  torch::NoGradGuard no_grad;
  // Drawn on the CPU in double, then converted: the same centroids for a seed whatever the device or dtype.
  auto gen = compat::make_generator(c10::Device(c10::DeviceType::CPU), seed);
  auto draw = torch::randn({heads, clusters, head_dim}, gen, torch::dtype(torch::kDouble));
  auto options_no_grad = options.requires_grad(false);
  RoutingCentroids state;
  state.centroids = unit(draw).to(options_no_grad);
  state.sums = state.centroids.clone();  // c = 1 and mu~ = mu: eq. 10 holds from the start
  state.counts = torch::ones({heads, clusters}, options_no_grad);
  return state;
}

RoutingBatchStatistics routing_batch_statistics(const torch::Tensor& q, const torch::Tensor& k,
                                                const torch::Tensor& key_valid, const torch::Tensor& centroids) {
  torch::NoGradGuard no_grad;
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && q.size(0) == k.size(0), "routing_batch_statistics: q, k [B, H, T, Dh]");
  const int64_t clusters = centroids.size(1);
  const auto type = at::promote_types(q.scalar_type(), centroids.scalar_type());
  RoutingBatchStatistics batch;
  for (const auto* x : {&q, &k}) {
    // assigned [B, H, T, K]: one-hot of the nearest centroid, zero at padded positions.
    auto assigned = torch::one_hot(nearest_centroid(*x, centroids), clusters).to(type);
    if (key_valid.defined())
      assigned = assigned * key_valid.to(x->device()).view({x->size(0), 1, x->size(2), 1}).to(type);
    auto sums = torch::matmul(assigned.transpose(-2, -1), unit(x->detach().to(type))).sum(0);  // eq. 8's sums
    auto counts = assigned.sum(torch::IntArrayRef{0, 2});                                         // eq. 9's |mu|
    batch.sums = batch.sums.defined() ? batch.sums + sums : sums;
    batch.counts = batch.counts.defined() ? batch.counts + counts : counts;
  }
  batch.sums = batch.sums.to(centroids.options());
  batch.counts = batch.counts.to(centroids.options());
  return batch;
}

void apply_routing_ema(RoutingCentroids& state, const RoutingBatchStatistics& batch, double decay) {
  TORCH_CHECK(decay > 0.0 && decay < 1.0, "apply_routing_ema: decay must lie in (0, 1)");
  torch::NoGradGuard no_grad;
  state.sums.mul_(decay).add_(batch.sums.to(state.sums.options()), 1.0 - decay);        // eq. 8
  state.counts.mul_(decay).add_(batch.counts.to(state.counts.options()), 1.0 - decay);  // eq. 9
  auto counts = state.counts.unsqueeze(-1);
  state.centroids.copy_(torch::where(counts >= kMinCount, state.sums / counts.clamp_min(kMinCount),  // eq. 10
                                     state.centroids));
}

void routing_ema_update(RoutingCentroids& state, const torch::Tensor& q, const torch::Tensor& k,
                        const torch::Tensor& key_valid, double decay) {
  apply_routing_ema(state, routing_batch_statistics(q, k, key_valid, state.centroids), decay);
}

torch::Tensor routing_attention_balanced(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         const torch::Tensor& key_valid, const torch::Tensor& centroids,
                                         torch::Tensor* weights) {
  check_attention_shapes(q, k, v, key_valid, "routing_attention_balanced");
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), Dv = v.size(3), K = centroids.size(1);
  const auto long_options = torch::TensorOptions().dtype(torch::kLong).device(q.device());
  // Cluster size per row, w_b = ceil(L_b / K): from the row's real length, never from the padded T, so that a
  // row's clusters are the same alone and in a padded batch.
  auto lengths = key_valid.defined() ? key_valid.to(q.device()).sum(1).to(torch::kLong)
                                     : torch::full({B}, T, long_options);
  auto row_width = torch::div(lengths + (K - 1), K, "floor");
  const int64_t w = B > 0 && T > 0 ? row_width.max().item<int64_t>() : 0;  // w_max: the batch's block size
  if (w == 0) {
    if (weights) *weights = torch::zeros({B, H, T, T}, q.options());
    return torch::zeros({B, H, T, Dv}, v.options());
  }

  // Balanced top-w routing (Roy et al. Sec. 4): each centroid takes the w positions most similar to it. Padded
  // positions get -inf so they rank after every real one: slots 0..w_b-1 (sorted) are the row's own top w_b real
  // positions (w_b <= L_b), and the slots beyond w_b, which only the batch's longer rows need, are masked.
  auto top = [&](const torch::Tensor& x) {
    auto sims = cosine_to_centroids(x, centroids).transpose(-2, -1);  // [B, H, K, T]
    if (key_valid.defined())
      sims = sims.masked_fill(key_valid.to(q.device()).logical_not().view({B, 1, 1, T}),
                              -std::numeric_limits<double>::infinity());
    return std::get<1>(sims.topk(w, -1, /*largest=*/true, /*sorted=*/true));  // [B, H, K, w]
  };
  auto q_index = top(q), k_index = top(k);
  auto slot_ok = torch::arange(w, long_options).view({1, 1, 1, w}) < row_width.view({B, 1, 1, 1});  // [B,1,1,w]

  // Gather along the position axis with a flattened [B, H, K*w] index: the backward is a scatter into [B, H, T, .],
  // not into a K-times-expanded copy.
  auto gather = [&](const torch::Tensor& x, const torch::Tensor& index) {
    const int64_t d = x.size(3);
    return x.gather(2, index.reshape({B, H, K * w, 1}).expand({B, H, K * w, d})).view({B, H, K, w, d});
  };
  auto qc = gather(q, q_index), kc = gather(k, k_index), vc = gather(v, k_index);  // [B, H, K, w, .]
  // Attention within each cluster: P_i of eq. 11 is the cluster's w_b keys.
  auto attn = masked_softmax(scaled_dot_scores(qc, kc), slot_ok.unsqueeze(-2));  // [B, H, K, w, w]
  auto query_ok = slot_ok.unsqueeze(-1).to(attn.scalar_type());                   // [B, 1, 1, w, 1]
  auto cluster_out = torch::matmul(attn, vc) * query_ok;                          // [B, H, K, w, Dv]

  // Scatter back to the query positions and average over the clusters that picked each query. A query no cluster
  // picked (possible: the K top-w sets need not cover the row) gets zero output: the residual connection around
  // the attention layer carries its input through unchanged.
  auto flat_index = q_index.reshape({B, H, K * w});
  auto summed = torch::zeros({B, H, T, Dv}, cluster_out.options())
                    .scatter_add(2, flat_index.unsqueeze(-1).expand({B, H, K * w, Dv}),
                                 cluster_out.reshape({B, H, K * w, Dv}));
  auto picks = torch::zeros({B, H, T}, cluster_out.options())
                   .scatter_add(2, flat_index, query_ok.squeeze(-1).expand({B, H, K, w}).reshape({B, H, K * w}));
  auto inverse_picks = (1.0 / picks.clamp_min(1.0)).unsqueeze(-1);  // [B, H, T, 1]
  if (weights) {
    // The keys of one cluster are distinct positions, so scatter_add places each weight once; masked slots add 0.
    auto per_key = torch::zeros({B, H, K, w, T}, attn.options())
                       .scatter_add(4, k_index.unsqueeze(3).expand({B, H, K, w, w}), attn * query_ok);
    auto dense = torch::zeros({B, H, T, T}, attn.options())
                     .scatter_add(2, flat_index.unsqueeze(-1).expand({B, H, K * w, T}),
                                  per_key.reshape({B, H, K * w, T}));
    *weights = dense * inverse_picks;
  }
  return summed * inverse_picks;
}

torch::Tensor routing_causal_mask(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& key_valid,
                                  const torch::Tensor& centroids) {
  const int64_t B = q.size(0), T = q.size(2);
  TORCH_CHECK(k.size(2) == T, "routing_causal_mask: causal self-attention needs as many queries as keys");
  auto same = nearest_centroid(q, centroids).unsqueeze(-1) == nearest_centroid(k, centroids).unsqueeze(-2);
  // Eq. 11 within the causal mask, plus the diagonal: a query whose cluster holds no earlier key still attends to
  // itself instead of to nothing.
  auto eye = torch::eye(T, torch::TensorOptions().dtype(torch::kBool).device(q.device()));
  auto allowed = same.logical_or(eye).logical_and(causal_mask(T, T).to(q.device()));
  if (key_valid.defined()) {
    auto valid = key_valid.to(q.device());
    allowed = allowed.logical_and(valid.view({B, 1, 1, T})).logical_and(valid.view({B, 1, T, 1}));
  }
  return allowed;
}

torch::Tensor routing_attention_causal(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& key_valid, const torch::Tensor& centroids,
                                       torch::Tensor* weights) {
  check_attention_shapes(q, k, v, key_valid, "routing_attention_causal");
  auto w = masked_softmax(scaled_dot_scores(q, k), routing_causal_mask(q, k, key_valid, centroids));
  if (weights) *weights = w;
  return torch::matmul(w, v);
}

torch::Tensor routing_causal_row(const torch::Tensor& q_cluster, const torch::Tensor& key_clusters) {
  TORCH_CHECK(key_clusters.dim() == 3 && q_cluster.dim() == 2 && key_clusters.size(2) >= 1,
              "routing_causal_row: q_cluster [N, H], key_clusters [N, H, len >= 1]");
  const int64_t len = key_clusters.size(2);
  auto own = torch::arange(len, torch::TensorOptions().dtype(torch::kLong).device(key_clusters.device())) == len - 1;
  return (key_clusters == q_cluster.unsqueeze(-1)).logical_or(own);
}

torch::Tensor routing_attention_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const torch::Tensor& key_valid, const torch::Tensor& centroids,
                                     torch::Tensor* weights) {
  TORCH_CHECK(q.dim() == 4 && q.size(2) == 1 && k.dim() == 4 && v.dim() == 4 && k.size(2) == v.size(2),
              "routing_attention_step: q [N, H, 1, Dh], k [N, H, len, Dh], v [N, H, len, Dv]");
  // The keys' clusters are recomputed from the cache: with fixed centroids (decoding) they equal the full pass's.
  auto allowed = routing_causal_row(nearest_centroid(q, centroids).squeeze(-1), nearest_centroid(k, centroids));
  if (key_valid.defined()) allowed = allowed.logical_and(key_valid.to(q.device()).unsqueeze(1));
  auto w = masked_softmax(scaled_dot_scores(q, k), allowed.unsqueeze(2));  // [N, H, 1, len]
  if (weights) *weights = w;
  return torch::matmul(w, v);
}

RoutingSelfAttentionImpl::RoutingSelfAttentionImpl(const MultiHeadAttentionOptions& options,
                                                   const RoutingAttentionOptions& routing)
    : SelfAttentionImpl(options), routing_(routing) {
  validate_routing(routing.clusters, routing.decay);
  auto st = init_routing_centroids(options.heads, routing.clusters, head_dim_, options.seed);
  routing_centroids = register_buffer("routing_centroids", st.centroids);
  routing_sums = register_buffer("routing_sums", st.sums);
  routing_counts = register_buffer("routing_counts", st.counts);
}

torch::Tensor RoutingSelfAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                               const torch::Tensor& key_valid, bool causal, torch::Tensor* weights) {
  auto centroids = routing_centroids.to(q.scalar_type());
  auto out = causal ? routing_attention_causal(q, k, v, key_valid, centroids, weights)
                    : routing_attention_balanced(q, k, v, key_valid, centroids, weights);
  if (is_training()) {
    // Centroids follow the batch's queries and keys (eqs. 8-10) after they routed it; no gradient.
    torch::NoGradGuard no_grad;
    RoutingCentroids st{routing_centroids.clone(), routing_sums.clone(), routing_counts.clone()};
    routing_ema_update(st, q.detach().to(torch::kFloat), k.detach().to(torch::kFloat), key_valid, routing_.decay);
    routing_centroids.copy_(st.centroids);
    routing_sums.copy_(st.sums);
    routing_counts.copy_(st.counts);
  }
  return out;
}

torch::Tensor RoutingSelfAttentionImpl::attend_step(const torch::Tensor& q, const torch::Tensor& k,
                                                    const torch::Tensor& v, SelfAttentionCache& cache,
                                                    torch::Tensor* weights) {
  cache.kv.append(step_heads(k), step_heads(v));
  auto query = step_heads(q);
  auto c = cached_positions(query, cache);
  auto centroids = routing_centroids.to(query.scalar_type());
  auto key_clusters = nearest_centroid(c.k, centroids);                            // [N, H, L]
  auto query_cluster = nearest_centroid(query.unsqueeze(2), centroids).squeeze(2);  // [N, H]
  auto allowed = routing_causal_row(query_cluster, key_clusters)
                     .logical_and(c.own.to(query.device()).unsqueeze(1))
                     .unsqueeze(2);  // [N, H, 1, L]
  return merge_heads(softmax_attention(query.unsqueeze(2), c.k, c.v, allowed, weights));  // [N, H, 1, Dh]
}

}  // namespace parla::nn

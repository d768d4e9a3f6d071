#pragma once
// Routing attention (Roy et al. 2021, "Efficient Content-Based Sparse Attention with Routing Transformers"; seed
// 002, eqs. 8-11): queries and keys are routed to the nearest of K centroids, and query i attends only to the keys
// of its own cluster, P_i = {j : mu(q_i) = mu(k_j)} (eq. 11). The centroids are online k-means: exponential moving
// averages of the vectors assigned to them (eqs. 8-10), updated in training without gradients.
//
// Routing follows direction only: like Roy et al., who layer-normalise q and k before routing, it uses the unit
// vectors q/|q|, k/|k|. "Nearest" means the largest cosine similarity q.mu / (|q| |mu|), which is the smallest
// squared distance |q/|q| - mu/|mu||^2 between the unit vectors. The attention itself is Vaswani et al.'s scaled
// dot product softmax(q.k / sqrt(Dh)) on the unnormalised q, k, v.
//
// Two forms, both over [B, H, T, Dh] tensors with centroids per head [H, K, Dh]:
//  - balanced (encoder, non-causal): every centroid takes its w = ceil(L / K) most similar queries and keys (L =
//    the row's real length), as in Roy et al.'s balanced top-k routing, so the work is K dense [w, w] blocks:
//    batched matmuls of O(L^2 / K) instead of O(L^2). A query several clusters picked averages their outputs;
//    one that no cluster picked gets zero output (the residual connection around the layer carries it).
//  - causal (decoder): nearest-centroid routing, so that a query's keys do not depend on later positions and
//    incremental decoding equals the full pass. Query i sees keys j <= i of its cluster, plus always itself.
//
// Padded positions (key_valid false) never take part: not in the EMA sums and counts, not in any cluster, not
// as keys. The outputs at padded query positions are zero.
//
// RoutingSelfAttention is the layer (model.attention "routing"): balanced routing when not causal, causal routing
// in the decoder, and the centroids as buffers that training moves.
#include <cstdint>

#include <torch/types.h>

#include "nn/self_attention.h"

namespace parla::nn {

// Throws parla::ConfigError naming "model.routing_clusters" for clusters < 1 and "model.routing_decay" for a decay
// (lambda of eqs. 8-9) outside the open interval (0, 1).
void validate_routing(int64_t clusters, double decay);

// Index of the nearest centroid (largest cosine similarity) of every vector: x [..., H, T, Dh], centroids
// [H, K, Dh] -> int64 [..., H, T]. No gradient (routing is a hard assignment). Computed in the wider of the two
// dtypes (half-precision x against float centroids routes in float).
torch::Tensor nearest_centroid(const torch::Tensor& x, const torch::Tensor& centroids);

// The online k-means state of one attention layer, to be registered as module buffers (saved in checkpoints):
// centroids mu [H, K, Dh], their EMA sums mu~ [H, K, Dh] and EMA counts c [H, K], with mu = mu~ / c (eq. 10).
struct RoutingCentroids {
  torch::Tensor centroids, sums, counts;
};

// Random unit centroids drawn from `seed` (the same on every device and rank); sums = centroids, counts = 1.
RoutingCentroids init_routing_centroids(int64_t heads, int64_t clusters, int64_t head_dim, uint64_t seed,
                                        const torch::TensorOptions& options = torch::kFloat);

// One batch's contribution to eqs. 8-9 before the decay: sums [H, K, Dh] = sum of the unit q and k vectors assigned
// to each centroid, counts [H, K] = |mu|, the number of them. Split from the update so that data-parallel training
// can all-reduce (sum) them over ranks first and keep the centroids identical everywhere.
struct RoutingBatchStatistics {
  torch::Tensor sums, counts;
};

// q, k [B, H, T, Dh] (normalised inside, gradients ignored), key_valid bool [B, T] (true = real token; padded
// query and key positions are left out) or undefined, centroids [H, K, Dh] (the current ones, which assign).
RoutingBatchStatistics routing_batch_statistics(const torch::Tensor& q, const torch::Tensor& k,
                                                const torch::Tensor& key_valid, const torch::Tensor& centroids);

// Eqs. 8-10 with lambda = decay, in place (so that the tensors registered as buffers see the new values):
//   sums <- decay sums + (1 - decay) batch.sums; counts <- decay counts + (1 - decay) batch.counts;
//   centroids <- sums / counts.
// A centroid whose count has decayed below 1e-12 (unused for ln(1e-12) / ln(decay) updates) keeps its old value:
// its sums would be underflowing too, and eq. 10 would become 0 / 0.
void apply_routing_ema(RoutingCentroids& state, const RoutingBatchStatistics& batch, double decay);

// routing_batch_statistics followed by apply_routing_ema (single-process training).
void routing_ema_update(RoutingCentroids& state, const torch::Tensor& q, const torch::Tensor& k,
                        const torch::Tensor& key_valid, double decay);

// Balanced (encoder) routing attention of q, k [B, H, T, Dh], v [B, H, T, Dv]; key_valid bool [B, T] or undefined;
// centroids [H, K, Dh] -> [B, H, T, Dv]. Row b's clusters hold w_b = ceil(L_b / K) queries and keys, independent
// of the padding T (a padded batch equals its rows run alone). With K = 1 it is full attention. `weights`, when
// non-null, receives the dense equivalent [B, H, T, T] (out = weights v; for tests and heatmaps, quadratic).
torch::Tensor routing_attention_balanced(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         const torch::Tensor& key_valid, const torch::Tensor& centroids,
                                         torch::Tensor* weights = nullptr);

// The allowed keys of causal routing attention: bool [B, H, T, T], (i, j) allowed when j <= i, j is real and
// (cluster(k_j) == cluster(q_i) or j == i). The diagonal keeps every real query's set non-empty (a query whose
// cluster has no earlier key would otherwise attend to nothing); padded query rows are empty.
torch::Tensor routing_causal_mask(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& key_valid,
                                  const torch::Tensor& centroids);

// Causal (decoder) routing attention: q, k [B, H, T, Dh], v [B, H, T, Dv], key_valid [B, T] or undefined ->
// [B, H, T, Dv], masked scaled dot-product attention under routing_causal_mask (quadratic in T, like full
// attention: the routing changes what is attended, not the cost). `weights` receives [B, H, T, T].
torch::Tensor routing_attention_causal(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& key_valid, const torch::Tensor& centroids,
                                       torch::Tensor* weights = nullptr);

// Incremental decoding, the row of the newest query: q_cluster int64 [N, H] (nearest_centroid of the new query),
// key_clusters int64 [N, H, len] (nearest_centroid of the cached keys, the newest last) -> bool [N, H, len], true
// where the key's cluster is the query's; the last key, the query's own, is always allowed (as the diagonal of
// routing_causal_mask).
torch::Tensor routing_causal_row(const torch::Tensor& q_cluster, const torch::Tensor& key_clusters);

// One decoding step: q [N, H, 1, Dh] over the cached k [N, H, len, Dh], v [N, H, len, Dv] (the newest position
// last, already appended); key_valid bool [N, len] or undefined (positions a row may not read, e.g. before it
// joined a running batch). Routes with `centroids` and returns [N, H, 1, Dv], equal to the last row of
// routing_attention_causal over the same positions; `weights` receives [N, H, 1, len].
torch::Tensor routing_attention_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const torch::Tensor& key_valid, const torch::Tensor& centroids,
                                     torch::Tensor* weights = nullptr);

struct RoutingAttentionOptions {
  int64_t clusters = 4;   // centroids per head (model.routing_clusters)
  double decay = 0.999;   // lambda of the centroids' moving averages (model.routing_decay)
};

class RoutingSelfAttentionImpl : public SelfAttentionImpl {
 public:
  // Throws ConfigError for bad options (validate_routing); initial centroids from options.seed.
  RoutingSelfAttentionImpl(const MultiHeadAttentionOptions& options, const RoutingAttentionOptions& routing);

  // The centroid state (buffers, saved in checkpoints; seed 002 eqs. 8-10): centroids [H, K, Dh], their moving
  // sums [H, K, Dh] and counts [H, K].
  torch::Tensor routing_centroids, routing_sums, routing_counts;

 protected:
  // In training the centroids then follow the batch's queries and keys (eqs. 8-10), without gradient.
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& key_valid, bool causal, torch::Tensor* weights) override;
  // The whole key/value cache, each key allowed when routed to the newest query's cluster (routing_causal_row).
  torch::Tensor attend_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            SelfAttentionCache& cache, torch::Tensor* weights) override;

 private:
  RoutingAttentionOptions routing_;
};
TORCH_MODULE(RoutingSelfAttention);

}  // namespace parla::nn

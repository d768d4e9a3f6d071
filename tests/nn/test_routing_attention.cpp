// Routing attention (Roy et al. 2021; seed 002, eqs. 8-11) against references written from the definitions in
// double precision: nearest centroids by looping over the centroids, the EMA of eqs. 8-10 by looping over the
// positions, the balanced clusters by sorting the similarities, the causal key sets by testing j <= i and the
// clusters one pair at a time, and attention as softmax over each explicit key set (plain torch ops on the
// selected rows, so that the reference also has gradients).
// REQUIRE, not CHECK: LibTorch includes glog, whose CHECK macro replaces Catch's and aborts on failure.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "core/error.h"
#include "nn/routing_attention.h"
#include "support/tensors.h"

namespace parla_test_routing {

using parla::testing::max_abs_diff;
namespace nn = parla::nn;

std::vector<double> values(const torch::Tensor& t) {
  auto c = t.detach().to(torch::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

double cosine(const std::vector<double>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

std::vector<double> unit(const std::vector<double>& a) {
  double n = 0;
  for (double x : a) n += x * x;
  std::vector<double> u(a);
  for (double& x : u) x /= std::sqrt(n);
  return u;
}

// The definition: the centroid of head h with the largest cosine similarity to x (the first one on ties).
int64_t brute_nearest(const std::vector<double>& x, const torch::Tensor& centroids, int64_t h) {
  int64_t best = 0;
  double best_sim = -INFINITY;
  for (int64_t c = 0; c < centroids.size(1); ++c) {
    const double s = cosine(x, values(centroids[h][c]));
    if (s > best_sim) best_sim = s, best = c;
  }
  return best;
}

// brute_nearest of every vector of x [B, H, T, Dh], indexed (b * H + h) * T + t.
std::vector<int64_t> brute_clusters(const torch::Tensor& x, const torch::Tensor& centroids) {
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2);
  std::vector<int64_t> c(B * H * T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) c[(b * H + h) * T + t] = brute_nearest(values(x[b][h][t]), centroids, h);
  return c;
}

bool real(const torch::Tensor& valid, int64_t b, int64_t t) { return !valid.defined() || valid[b][t].item<bool>(); }

struct Inputs {
  torch::Tensor q, k, v, valid;
};

// Marks (b, t) as padding and fills it adversarially: q and k point exactly at a centroid with a large norm (they
// would be routed first if padding leaked into the routing) and v is large (it would show in any output).
void pad(Inputs& in, const torch::Tensor& centroids, int64_t b, int64_t t) {
  in.valid[b][t].fill_(false);
  for (int64_t h = 0; h < in.q.size(1); ++h) {
    in.q[b][h][t].copy_(50.0 * centroids[h][t % centroids.size(1)]);
    in.k[b][h][t].copy_(40.0 * centroids[h][(t + 1) % centroids.size(1)]);
    in.v[b][h][t].fill_(1000.0);
  }
}

// Random double q, k [B, H, T, Dh], v [B, H, T, Dv]; positions t >= lengths[b] are padding.
Inputs make_inputs(int64_t H, int64_t T, int64_t Dh, int64_t Dv, const std::vector<int64_t>& lengths,
                   const torch::Tensor& centroids, uint64_t seed) {
  const int64_t B = static_cast<int64_t>(lengths.size());
  auto gen = at::detail::createCPUGenerator(seed);
  auto opt = torch::dtype(torch::kDouble);
  Inputs in{torch::randn({B, H, T, Dh}, gen, opt), torch::randn({B, H, T, Dh}, gen, opt),
            torch::randn({B, H, T, Dv}, gen, opt), torch::ones({B, T}, torch::kBool)};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = lengths[b]; t < T; ++t) pad(in, centroids, b, t);
  return in;
}

torch::Tensor double_centroids(int64_t H, int64_t K, int64_t Dh, uint64_t seed) {
  return nn::init_routing_centroids(H, K, Dh, seed, torch::kDouble).centroids;
}

// For every query (index (b * H + h) * T + i): the key sets it attends to; its output is the mean over the sets of
// softmax attention within each set, zero when it has none.
using KeySets = std::vector<std::vector<int64_t>>;

struct Reference {
  torch::Tensor out, weights;  // [B, H, T, Dv] (with the inputs' autograd graph) and dense [B, H, T, T]
};

Reference naive_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          const std::vector<KeySets>& sets) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), Dh = q.size(3), Dv = v.size(3);
  std::vector<torch::Tensor> rows;
  std::vector<double> w(B * H * T * T, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const int64_t row = (b * H + h) * T + i;
        const KeySets& s = sets[row];
        auto acc = torch::zeros({Dv}, torch::kDouble);
        for (const auto& keys : s) {
          auto idx = torch::tensor(keys, torch::kLong);
          auto p = torch::softmax(torch::mv(k[b][h].index_select(0, idx), q[b][h][i]) / std::sqrt(double(Dh)), 0);
          acc = acc + torch::mv(v[b][h].index_select(0, idx).t(), p) / double(s.size());
          auto pd = values(p);
          for (size_t j = 0; j < keys.size(); ++j) w[row * T + keys[j]] += pd[j] / double(s.size());
        }
        rows.push_back(acc);
      }
  return {torch::stack(rows).view({B, H, T, Dv}), torch::tensor(w, torch::kDouble).view({B, H, T, T})};
}

// Real positions of row b sorted by decreasing cosine similarity of x to centroid c of head h.
std::vector<int64_t> ranked(const torch::Tensor& x, const torch::Tensor& valid, const torch::Tensor& centroids,
                            int64_t b, int64_t h, int64_t c) {
  std::vector<std::pair<double, int64_t>> s;
  const auto mu = values(centroids[h][c]);
  for (int64_t t = 0; t < x.size(2); ++t)
    if (real(valid, b, t)) s.push_back({cosine(values(x[b][h][t]), mu), t});
  std::sort(s.begin(), s.end(), [](const auto& a, const auto& z) { return a.first > z.first; });
  std::vector<int64_t> order;
  for (const auto& e : s) order.push_back(e.second);
  return order;
}

// Balanced routing by the definition: each centroid takes the top w = ceil(L / K) real queries and keys.
std::vector<KeySets> balanced_sets(const Inputs& in, const torch::Tensor& centroids) {
  const int64_t B = in.q.size(0), H = in.q.size(1), T = in.q.size(2), K = centroids.size(1);
  std::vector<KeySets> sets(B * H * T);
  for (int64_t b = 0; b < B; ++b) {
    int64_t L = 0;
    for (int64_t t = 0; t < T; ++t) L += real(in.valid, b, t);
    const int64_t w = (L + K - 1) / K;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t c = 0; c < K; ++c) {
        auto queries = ranked(in.q, in.valid, centroids, b, h, c), keys = ranked(in.k, in.valid, centroids, b, h, c);
        queries.resize(w);
        keys.resize(w);
        for (int64_t i : queries) sets[(b * H + h) * T + i].push_back(keys);
      }
  }
  return sets;
}

// Causal routing by the definition: real query i attends to real keys j <= i with cluster(k_j) == cluster(q_i),
// and to itself. With `route` false: causal full attention.
std::vector<KeySets> causal_sets(const Inputs& in, const torch::Tensor& centroids, bool route = true) {
  const int64_t B = in.q.size(0), H = in.q.size(1), T = in.q.size(2);
  const auto cq = brute_clusters(in.q, centroids), ck = brute_clusters(in.k, centroids);
  std::vector<KeySets> sets(B * H * T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        if (!real(in.valid, b, i)) continue;
        std::vector<int64_t> keys;
        for (int64_t j = 0; j <= i; ++j)
          if (real(in.valid, b, j) && (!route || j == i || cq[(b * H + h) * T + i] == ck[(b * H + h) * T + j]))
            keys.push_back(j);
        sets[(b * H + h) * T + i].push_back(keys);
      }
  return sets;
}

// Full (non-causal) attention over the real keys, for every real query.
std::vector<KeySets> full_sets(const Inputs& in) {
  const int64_t B = in.q.size(0), H = in.q.size(1), T = in.q.size(2);
  std::vector<KeySets> sets(B * H * T);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int64_t> keys;
    for (int64_t j = 0; j < T; ++j)
      if (real(in.valid, b, j)) keys.push_back(j);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i)
        if (real(in.valid, b, i)) sets[(b * H + h) * T + i].push_back(keys);
  }
  return sets;
}

TEST_CASE("nearest_centroid picks the centroid of largest cosine similarity", "[routing]") {
  auto gen = at::detail::createCPUGenerator(11);
  auto x = torch::randn({2, 3, 5, 4}, gen, torch::kDouble);
  // Centroids of very different norms: the largest dot product is often not the largest cosine.
  auto centroids = torch::randn({3, 4, 4}, gen, torch::kDouble) *
                   torch::rand({3, 4, 1}, gen, torch::kDouble).mul(10.0).add(0.1);
  const auto expected = brute_clusters(x, centroids);
  const auto got = nn::nearest_centroid(x, centroids).contiguous();
  REQUIRE(got.scalar_type() == torch::kLong);
  REQUIRE(got.sizes().vec() == std::vector<int64_t>{2, 3, 5});
  const int64_t* g = got.data_ptr<int64_t>();
  for (size_t i = 0; i < expected.size(); ++i) REQUIRE(g[i] == expected[i]);

  // x = (1, 0): centroid (10, 10) has the larger dot product (10 > 1), centroid (1, 0) the larger cosine.
  auto c2 = torch::tensor({10.0, 10.0, 1.0, 0.0}, torch::kDouble).view({1, 2, 2});
  auto x2 = torch::tensor({1.0, 0.0}, torch::kDouble).view({1, 1, 1, 2});
  REQUIRE(nn::nearest_centroid(x2, c2).item<int64_t>() == 1);

  // Half-width inputs route against float centroids in float, with the same answer as the double loop.
  auto xf = x.to(torch::kFloat);
  const auto expected_f = brute_clusters(xf, centroids.to(torch::kFloat));
  const auto got_f = nn::nearest_centroid(xf, centroids.to(torch::kFloat)).contiguous();
  for (size_t i = 0; i < expected_f.size(); ++i) REQUIRE(got_f.data_ptr<int64_t>()[i] == expected_f[i]);
}

TEST_CASE("init_routing_centroids draws unit centroids reproducibly from the seed", "[routing]") {
  auto a = nn::init_routing_centroids(2, 3, 4, 5, torch::kDouble);
  auto b = nn::init_routing_centroids(2, 3, 4, 5, torch::kDouble);
  auto c = nn::init_routing_centroids(2, 3, 4, 6, torch::kDouble);
  REQUIRE(a.centroids.sizes().vec() == std::vector<int64_t>{2, 3, 4});
  REQUIRE(a.counts.sizes().vec() == std::vector<int64_t>{2, 3});
  REQUIRE(max_abs_diff(a.centroids, b.centroids) == 0.0);
  REQUIRE(max_abs_diff(a.centroids, c.centroids) > 0.1);
  REQUIRE(max_abs_diff(a.sums, a.centroids) == 0.0);
  REQUIRE(max_abs_diff(a.counts, torch::ones({2, 3}, torch::kDouble)) == 0.0);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t k = 0; k < 3; ++k) {
      double n = 0;
      for (double x : values(a.centroids[h][k])) n += x * x;
      REQUIRE(std::abs(n - 1.0) < 1e-12);
    }
  auto f = nn::init_routing_centroids(2, 3, 4, 5);
  REQUIRE(f.centroids.scalar_type() == torch::kFloat);
  REQUIRE(max_abs_diff(f.centroids, a.centroids) < 1e-6);
  REQUIRE_FALSE(f.centroids.requires_grad());
}

// Eqs. 8-10 by hand: a loop over the real positions of q and k, each assigned to its nearest centroid (of the
// state before the update) and added as a unit vector.
nn::RoutingCentroids ema_reference(const nn::RoutingCentroids& old, const Inputs& in, double decay,
                                   torch::Tensor* batch_sums, torch::Tensor* batch_counts) {
  const int64_t B = in.q.size(0), H = in.q.size(1), T = in.q.size(2), K = old.centroids.size(1),
                Dh = old.centroids.size(2);
  std::vector<double> sums(H * K * Dh, 0.0), counts(H * K, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      if (!real(in.valid, b, t)) continue;
      for (const auto* x : {&in.q, &in.k})
        for (int64_t h = 0; h < H; ++h) {
          const auto u = unit(values((*x)[b][h][t]));
          const int64_t c = brute_nearest(u, old.centroids, h);
          counts[h * K + c] += 1;
          for (int64_t d = 0; d < Dh; ++d) sums[(h * K + c) * Dh + d] += u[d];
        }
    }
  *batch_sums = torch::tensor(sums, torch::kDouble).view({H, K, Dh});
  *batch_counts = torch::tensor(counts, torch::kDouble).view({H, K});
  auto old_sums = values(old.sums), old_counts = values(old.counts);
  std::vector<double> new_sums(H * K * Dh), new_counts(H * K), new_centroids(H * K * Dh);
  for (int64_t hk = 0; hk < H * K; ++hk) {
    new_counts[hk] = decay * old_counts[hk] + (1 - decay) * counts[hk];                  // eq. 9
    for (int64_t d = 0; d < Dh; ++d) {
      const int64_t i = hk * Dh + d;
      new_sums[i] = decay * old_sums[i] + (1 - decay) * sums[i];                         // eq. 8
      new_centroids[i] = new_sums[i] / new_counts[hk];                                   // eq. 10
    }
  }
  return {torch::tensor(new_centroids, torch::kDouble).view({H, K, Dh}),
          torch::tensor(new_sums, torch::kDouble).view({H, K, Dh}),
          torch::tensor(new_counts, torch::kDouble).view({H, K})};
}

TEST_CASE("routing_ema_update follows the moving averages of eqs 8 to 10 and ignores padding", "[routing]") {
  const int64_t H = 2, K = 3, Dh = 3, T = 4;
  auto state = nn::init_routing_centroids(H, K, Dh, 7, torch::kDouble);
  auto buffer = state.centroids;  // what a module registered: it must see the update (in place)
  const double decay = 0.9;
  for (int step = 0; step < 2; ++step) {
    auto in = make_inputs(H, T, Dh, 2, {4, 2}, state.centroids, 100 + step);
    nn::RoutingCentroids old{state.centroids.clone(), state.sums.clone(), state.counts.clone()};
    torch::Tensor sums, counts;
    auto expected = ema_reference(old, in, decay, &sums, &counts);

    auto batch = nn::routing_batch_statistics(in.q, in.k, in.valid, state.centroids);
    REQUIRE(max_abs_diff(batch.sums, sums) < 1e-12);
    REQUIRE(max_abs_diff(batch.counts, counts) == 0.0);
    REQUIRE(batch.counts.sum().item<double>() == 2.0 * H * 6);  // 6 real positions, a query and a key each per head

    nn::routing_ema_update(state, in.q, in.k, in.valid, decay);
    REQUIRE(max_abs_diff(state.sums, expected.sums) < 1e-12);
    REQUIRE(max_abs_diff(state.counts, expected.counts) < 1e-12);
    REQUIRE(max_abs_diff(state.centroids, expected.centroids) < 1e-12);
    REQUIRE(buffer.data_ptr() == state.centroids.data_ptr());
  }
}

TEST_CASE("balanced routing with one cluster is full attention over the real keys", "[routing]") {
  auto centroids = double_centroids(2, 1, 4, 3);
  auto in = make_inputs(2, 6, 4, 3, {6, 4}, centroids, 21);
  torch::Tensor w;
  auto out = nn::routing_attention_balanced(in.q, in.k, in.v, in.valid, centroids, &w);
  auto ref = naive_attention(in.q, in.k, in.v, full_sets(in));
  REQUIRE(max_abs_diff(out, ref.out) < 1e-12);
  REQUIRE(max_abs_diff(w, ref.weights) < 1e-12);
  REQUIRE(max_abs_diff(torch::matmul(w, in.v.masked_fill(in.valid.logical_not().view({2, 1, 6, 1}), 0.0)), out) <
        1e-12);
}

TEST_CASE("balanced routing equals a per-cluster loop over the top-w queries and keys", "[routing]") {
  SECTION("random inputs with padding") {
    auto centroids = double_centroids(2, 3, 4, 4);
    auto in = make_inputs(2, 7, 4, 3, {7, 5}, centroids, 22);
    torch::Tensor w;
    auto out = nn::routing_attention_balanced(in.q, in.k, in.v, in.valid, centroids, &w);
    auto ref = naive_attention(in.q, in.k, in.v, balanced_sets(in, centroids));
    REQUIRE(max_abs_diff(out, ref.out) < 1e-12);
    REQUIRE(max_abs_diff(w, ref.weights) < 1e-12);
  }
  SECTION("a query no cluster picks gets zero output and one picked twice averages") {
    // Centroids e1, e2; w = ceil(4 / 2) = 2. Top 2 for e1: q0, q1; for e2: q2, q1. q3 (pointing away) is unpicked.
    auto centroids = torch::tensor({1.0, 0.0, 0.0, 1.0}, torch::kDouble).view({1, 2, 2});
    auto q = torch::tensor({1.0, 0.1, 1.0, 0.2, 1.0, 0.3, 0.1, -1.0}, torch::kDouble).view({1, 1, 4, 2});
    auto gen = at::detail::createCPUGenerator(23);
    Inputs in{q, torch::randn({1, 1, 4, 2}, gen, torch::kDouble), torch::randn({1, 1, 4, 3}, gen, torch::kDouble),
              torch::Tensor()};
    auto sets = balanced_sets(in, centroids);
    REQUIRE(sets[1].size() == 2);
    REQUIRE(sets[3].empty());
    torch::Tensor w;
    auto out = nn::routing_attention_balanced(in.q, in.k, in.v, in.valid, centroids, &w);
    auto ref = naive_attention(in.q, in.k, in.v, sets);
    REQUIRE(max_abs_diff(out, ref.out) < 1e-12);
    REQUIRE(max_abs_diff(w, ref.weights) < 1e-12);
    REQUIRE(out[0][0][3].abs().max().item<double>() == 0.0);
    REQUIRE(w[0][0][3].abs().max().item<double>() == 0.0);
  }
}

TEST_CASE("causal routing with one cluster is causal full attention", "[routing]") {
  auto centroids = double_centroids(2, 1, 4, 5);
  auto in = make_inputs(2, 6, 4, 3, {6, 3}, centroids, 31);
  torch::Tensor w;
  auto out = nn::routing_attention_causal(in.q, in.k, in.v, in.valid, centroids, &w);
  auto ref = naive_attention(in.q, in.k, in.v, causal_sets(in, centroids, /*route=*/false));
  REQUIRE(max_abs_diff(out, ref.out) < 1e-12);
  REQUIRE(max_abs_diff(w, ref.weights) < 1e-12);
}

TEST_CASE("causal routing attends to the earlier keys of the query's cluster and to itself", "[routing]") {
  auto centroids = double_centroids(2, 3, 4, 6);
  auto in = make_inputs(2, 7, 4, 3, {7, 5}, centroids, 32);
  auto sets = causal_sets(in, centroids);
  // The mask, entry by entry.
  auto mask = nn::routing_causal_mask(in.q, in.k, in.valid, centroids);
  REQUIRE(mask.sizes().vec() == std::vector<int64_t>{2, 2, 7, 7});
  int64_t allowed = 0, routed_away = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < 7; ++i)
        for (int64_t j = 0; j < 7; ++j) {
          const auto& s = sets[(b * 2 + h) * 7 + i];
          const bool expected = !s.empty() && std::find(s[0].begin(), s[0].end(), j) != s[0].end();
          REQUIRE(mask[b][h][i][j].item<bool>() == expected);
          allowed += expected;
          routed_away += (j <= i && real(in.valid, b, i) && real(in.valid, b, j) && !expected);
        }
  REQUIRE(routed_away > 0);  // the routing did exclude some causal keys
  REQUIRE(allowed > 0);
  torch::Tensor w;
  auto out = nn::routing_attention_causal(in.q, in.k, in.v, in.valid, centroids, &w);
  auto ref = naive_attention(in.q, in.k, in.v, sets);
  REQUIRE(max_abs_diff(out, ref.out) < 1e-12);
  REQUIRE(max_abs_diff(w, ref.weights) < 1e-12);
}

TEST_CASE("incremental causal routing steps equal the full causal pass", "[routing]") {
  const int64_t H = 2, T = 6, Dh = 4, Dv = 3;
  auto centroids = double_centroids(H, 3, Dh, 8);
  // Row 1 joined a running batch late: its first two positions are not its own (key_valid false).
  auto in = make_inputs(H, T, Dh, Dv, {T, T}, centroids, 41);
  pad(in, centroids, 1, 0);
  pad(in, centroids, 1, 1);
  torch::Tensor full_w;
  auto full = nn::routing_attention_causal(in.q, in.k, in.v, in.valid, centroids, &full_w);
  auto ref = naive_attention(in.q, in.k, in.v, causal_sets(in, centroids));
  REQUIRE(max_abs_diff(full, ref.out) < 1e-12);
  const auto cq = brute_clusters(in.q, centroids), ck = brute_clusters(in.k, centroids);
  for (int64_t t = 0; t < T; ++t) {
    auto q = in.q.narrow(2, t, 1), k = in.k.narrow(2, 0, t + 1), v = in.v.narrow(2, 0, t + 1);
    auto valid = in.valid.narrow(1, 0, t + 1);
    auto row =
        nn::routing_causal_row(nn::nearest_centroid(q, centroids).squeeze(-1), nn::nearest_centroid(k, centroids));
    REQUIRE(row.sizes().vec() == std::vector<int64_t>{2, H, t + 1});
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < H; ++h) {
        // The row from the definition, then softmax over its real keys by hand.
        std::vector<double> s(t + 1);
        double top = -INFINITY, z = 0;
        std::vector<bool> ok(t + 1);
        for (int64_t j = 0; j <= t; ++j) {
          const bool same = j == t || cq[(b * H + h) * T + t] == ck[(b * H + h) * T + j];
          REQUIRE(row[b][h][j].item<bool>() == same);
          ok[j] = row[b][h][j].item<bool>() && real(in.valid, b, j);
          const auto qv = values(q[b][h][0]), kv = values(k[b][h][j]);
          double dot = 0;
          for (int64_t d = 0; d < Dh; ++d) dot += qv[d] * kv[d];
          s[j] = dot / std::sqrt(double(Dh));
          if (ok[j]) top = std::max(top, s[j]);
        }
        std::vector<double> out(Dv, 0.0);
        for (int64_t j = 0; j <= t; ++j)
          if (ok[j]) z += std::exp(s[j] - top);
        for (int64_t j = 0; j <= t; ++j)
          if (ok[j]) {
            const auto vv = values(v[b][h][j]);
            for (int64_t d = 0; d < Dv; ++d) out[d] += std::exp(s[j] - top) / z * vv[d];
          }
        REQUIRE(max_abs_diff(torch::tensor(out, torch::kDouble), full[b][h][t]) < 1e-12);
      }
    torch::Tensor step_w;
    auto step = nn::routing_attention_step(q, k, v, valid, centroids, &step_w);
    REQUIRE(max_abs_diff(step, full.narrow(2, t, 1)) < 1e-12);
    REQUIRE(max_abs_diff(step_w, full_w.narrow(2, t, 1).narrow(3, 0, t + 1)) < 1e-12);
  }
}

TEST_CASE("a padded batch gives each sentence what it gets alone in both routing forms", "[routing]") {
  const int64_t H = 2, T = 7;
  const std::vector<int64_t> lengths{7, 4, 2};
  auto centroids = double_centroids(H, 3, 4, 9);
  auto in = make_inputs(H, T, 4, 3, lengths, centroids, 51);
  for (bool causal : {false, true}) {
    auto attend = [&](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                      const torch::Tensor& valid, torch::Tensor* w) {
      return causal ? nn::routing_attention_causal(q, k, v, valid, centroids, w)
                    : nn::routing_attention_balanced(q, k, v, valid, centroids, w);
    };
    torch::Tensor w;
    auto out = attend(in.q, in.k, in.v, in.valid, &w);
    for (int64_t b = 0; b < 3; ++b) {
      const int64_t L = lengths[b];
      auto cut = [&](const torch::Tensor& x) { return x.narrow(0, b, 1).narrow(2, 0, L); };
      torch::Tensor w1;
      auto out1 = attend(cut(in.q), cut(in.k), cut(in.v), torch::Tensor(), &w1);
      REQUIRE(max_abs_diff(out.narrow(0, b, 1).narrow(2, 0, L), out1) < 1e-12);
      REQUIRE(max_abs_diff(w.narrow(0, b, 1).narrow(2, 0, L).narrow(3, 0, L), w1) < 1e-12);
      if (L < T) {
        REQUIRE(w.narrow(0, b, 1).narrow(3, L, T - L).abs().max().item<double>() == 0.0);  // no weight on padding
        REQUIRE(out.narrow(0, b, 1).narrow(2, L, T - L).abs().max().item<double>() == 0.0);
      }
    }
  }
}

TEST_CASE("gradients of both routing forms reach q k and v and match the reference", "[routing]") {
  auto centroids = double_centroids(2, 2, 4, 10);
  auto in = make_inputs(2, 6, 4, 3, {6, 4}, centroids, 61);
  auto gen = at::detail::createCPUGenerator(62);
  auto r = torch::randn({2, 2, 6, 3}, gen, torch::kDouble);
  for (bool causal : {false, true}) {
    auto leaves = [&]() {
      return std::vector<torch::Tensor>{in.q.clone().requires_grad_(true), in.k.clone().requires_grad_(true),
                                        in.v.clone().requires_grad_(true)};
    };
    auto a = leaves(), b = leaves();
    auto out = causal ? nn::routing_attention_causal(a[0], a[1], a[2], in.valid, centroids)
                      : nn::routing_attention_balanced(a[0], a[1], a[2], in.valid, centroids);
    (out * r).sum().backward();
    auto ref = naive_attention(b[0], b[1], b[2], causal ? causal_sets(in, centroids) : balanced_sets(in, centroids));
    (ref.out * r).sum().backward();
    for (int i = 0; i < 3; ++i) {
      REQUIRE(a[i].grad().defined());
      REQUIRE(torch::isfinite(a[i].grad()).all().item<bool>());
      REQUIRE(a[i].grad().abs().max().item<double>() > 1e-3);
      REQUIRE(max_abs_diff(a[i].grad(), b[i].grad()) < 1e-10);
    }
  }
}

TEST_CASE("validate_routing names the offending key", "[routing]") {
  REQUIRE_NOTHROW(nn::validate_routing(1, 0.999));
  REQUIRE_NOTHROW(nn::validate_routing(16, 0.5));
  REQUIRE_THROWS_WITH(nn::validate_routing(0, 0.9), Catch::Contains("model.routing_clusters"));
  REQUIRE_THROWS_AS(nn::validate_routing(-3, 0.9), parla::ConfigError);
  for (double bad : {0.0, 1.0, -0.5, 1.5, std::nan("")}) {
    REQUIRE_THROWS_AS(nn::validate_routing(4, bad), parla::ConfigError);
    REQUIRE_THROWS_WITH(nn::validate_routing(4, bad), Catch::Contains("model.routing_decay"));
  }
}

}  // namespace parla_test_routing

// The single-query attention kernel and the beam-indirected key/value cache against a plain reference: the
// cache kept as dense [N, H, T, Dh] tensors reordered row by row, and attention written as a double-precision
// loop over the formula softmax(q.k / sqrt(Dh)) v.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <torch/torch.h>

#include "nn/cross_attention.h"
#include "nn/linear_attention.h"
#include "nn/self_attention_cache.h"
#include "nn/single_query_attention.h"
#include "support/cuda.h"
#include "support/tensors.h"

using parla::testing::max_abs_diff;
using namespace parla::nn;

namespace {


// The reference cache: keys and values kept dense, [N, H, T, Dh], every row reordered at each beam step.
struct DenseCache {
  torch::Tensor k, v;
  void append(const torch::Tensor& new_k, const torch::Tensor& new_v) {
    k = k.defined() ? torch::cat({k, new_k.unsqueeze(2)}, 2) : new_k.unsqueeze(2);
    v = v.defined() ? torch::cat({v, new_v.unsqueeze(2)}, 2) : new_v.unsqueeze(2);
  }
  void reorder(const torch::Tensor& rows) {
    k = k.index_select(0, rows);
    v = v.index_select(0, rows);
  }
};

// out [N, H, Dh] and weights [N, H, L] of q [N, H, Dh] over k, v [N, H, L, Dh]; valid [N, L] or undefined.
std::pair<torch::Tensor, torch::Tensor> naive(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                              const torch::Tensor& valid) {
  auto qd = q.to(torch::kDouble), kd = k.to(torch::kDouble), vd = v.to(torch::kDouble);
  const int64_t N = q.size(0), H = q.size(1), Dh = q.size(2), L = k.size(2);
  auto out = torch::zeros({N, H, Dh}, torch::kDouble), weights = torch::zeros({N, H, L}, torch::kDouble);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> s(L, -INFINITY);
      double best = -INFINITY;
      for (int64_t j = 0; j < L; ++j) {
        if (valid.defined() && !valid[n][j].item<bool>()) continue;
        double dot = 0;
        for (int64_t d = 0; d < Dh; ++d) dot += qd[n][h][d].item<double>() * kd[n][h][j][d].item<double>();
        s[j] = dot / std::sqrt(static_cast<double>(Dh));
        best = std::max(best, s[j]);
      }
      if (best == -INFINITY) continue;
      double z = 0;
      for (int64_t j = 0; j < L; ++j) z += s[j] == -INFINITY ? 0.0 : std::exp(s[j] - best);
      for (int64_t j = 0; j < L; ++j) {
        double w = s[j] == -INFINITY ? 0.0 : std::exp(s[j] - best) / z;
        weights[n][h][j] = w;
        for (int64_t d = 0; d < Dh; ++d) out[n][h][d] += w * vd[n][h][j][d].item<double>();
      }
    }
  return {out, weights};
}

}  // namespace

TEST_CASE("beam-indirected cache: attention after reorders and dropped rows equals attention over dense reordered keys") {
  torch::manual_seed(3);
  const int64_t H = 2, Dh = 11;  // Dh not a multiple of the kernel's 8 lanes: the tail loop runs too
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    KeyValueCache cache;
    DenseCache dense;
    int64_t N = 6;
    for (int step = 0; step < 7; ++step) {
      auto k = torch::randn({N, H, Dh}, dtype), v = torch::randn({N, H, Dh}, dtype), q = torch::randn({N, H, Dh}, dtype);
      cache.append(k, v);
      dense.append(k, v);
      torch::Tensor w;
      auto out = attend_cache(q, cache, &w);
      auto [ref_out, ref_w] = naive(q, dense.k, dense.v, {});
      const double tol = dtype == torch::kFloat ? 1e-5 : 1e-12;
      CHECK(max_abs_diff(out, ref_out) < tol);
      CHECK(max_abs_diff(w, ref_w) < tol);
      auto [gk, gv] = cache.gather();
      CHECK(torch::equal(gk, dense.k));
      CHECK(torch::equal(gv, dense.v));
      // A beam reorder with repeated parents, and from step 3 on one row fewer (a finished sentence).
      const int64_t next = step >= 3 && N > 3 ? N - 1 : N;
      auto rows = torch::randint(0, N, {next}, torch::kLong);
      cache.reorder(rows);
      dense.reorder(rows);
      N = next;
    }
  }
}

TEST_CASE("beam-indirected cache: dropped positions are no longer attended") {
  torch::manual_seed(4);
  KeyValueCache cache;
  std::vector<torch::Tensor> ks, vs;
  for (int t = 0; t < 6; ++t) {
    ks.push_back(torch::randn({3, 2, 8}));
    vs.push_back(torch::randn({3, 2, 8}));
    cache.append(ks.back(), vs.back());
  }
  cache.drop_before(4);
  CHECK(cache.first() == 4);
  CHECK(cache.length() == 6);
  auto q = torch::randn({3, 2, 8});
  torch::Tensor w;
  auto out = attend_cache(q, cache, &w);
  auto [ref_out, ref_w] = naive(q, torch::stack({ks[4], ks[5]}, 2), torch::stack({vs[4], vs[5]}, 2), {});
  CHECK(w.size(2) == 2);
  CHECK(max_abs_diff(out, ref_out) < 1e-5);
  CHECK(max_abs_diff(w, ref_w) < 1e-5);
  cache.drop_before(2);  // never moves back
  CHECK(cache.first() == 4);
}

TEST_CASE("memory attention: the beams of a sentence share its memory row and its padding mask") {
  torch::manual_seed(5);
  const int64_t M = 3, G = 4, H = 2, S = 5, Dh = 16;
  auto kv = torch::randn({M, S, 2 * H * Dh});
  // Keys and values as the decoder makes them: strided views of one projection, not contiguous.
  auto k = kv.narrow(2, 0, H * Dh).view({M, S, H, Dh}).transpose(1, 2);
  auto v = kv.narrow(2, H * Dh, H * Dh).view({M, S, H, Dh}).transpose(1, 2);
  auto valid = torch::ones({M, S}, torch::kBool);
  valid[1][3] = false;
  valid[1][4] = false;
  valid[2] = false;  // no valid key at all: zero output, zero weights
  auto q = torch::randn({M * G, H, Dh});
  torch::Tensor w;
  auto out = attend_memory(q, k, v, valid, &w);
  auto expand = [&](const torch::Tensor& t) { return t.repeat_interleave(G, 0); };
  auto [ref_out, ref_w] = naive(q, expand(k), expand(v), expand(valid));
  CHECK(max_abs_diff(out, ref_out) < 1e-5);
  CHECK(max_abs_diff(w, ref_w) < 1e-5);
  CHECK(out.narrow(0, 2 * G, G).abs().max().item<float>() == 0.f);
  // Without a mask, one memory row per query row (G = 1).
  auto q1 = torch::randn({M, H, Dh});
  auto [ref1, ref1_w] = naive(q1, k, v, {});
  CHECK(max_abs_diff(attend_memory(q1, k, v, {}), ref1) < 1e-5);
}

TEST_CASE("memory attention through renumbered memory rows reads what the gathered rows give, bit for bit") {
  torch::manual_seed(12);
  const int64_t M = 5, G = 2, H = 2, S = 6, Dh = 12;
  auto k = torch::randn({M, H, S, Dh}), v = torch::randn({M, H, S, Dh});
  auto valid = torch::rand({M, S}) > 0.3;
  valid.select(1, 0).fill_(true);
  // Sentences 3, 0 and 3 again (rows may repeat), each with G beams: rows 1, 2 and 4 are never read.
  auto rows = torch::tensor(std::vector<int64_t>{3, 0, 3}, torch::kLong);
  const int64_t B = rows.numel() * G;
  auto q = torch::randn({B, H, Dh});
  auto want = attend_memory(q, k.index_select(0, rows), v.index_select(0, rows), valid.index_select(0, rows));
  auto got = torch::empty_like(q);
  attend_memory(q.data_ptr<float>(), H * Dh, B, k, v, valid, got.data_ptr<float>(), rows);
  CHECK(torch::equal(got, want));
  // Without the map the raw form reads row g for group g, as the tensor form.
  auto q3 = torch::randn({M * G, H, Dh});
  auto plain = torch::empty_like(q3);
  attend_memory(q3.data_ptr<float>(), H * Dh, M * G, k, v, valid, plain.data_ptr<float>());
  CHECK(torch::equal(plain, attend_memory(q3, k, v, valid)));
  auto bad = torch::tensor(std::vector<int64_t>{0, M, 1}, torch::kLong);
  CHECK_THROWS(attend_memory(q.data_ptr<float>(), H * Dh, B, k, v, valid, got.data_ptr<float>(), bad));
  auto uneven = torch::tensor(std::vector<int64_t>{0, 1, 2, 3}, torch::kLong);  // 6 rows are not 4 groups
  CHECK_THROWS(attend_memory(q.data_ptr<float>(), H * Dh, B, k, v, valid, got.data_ptr<float>(), uneven));
}

TEST_CASE("single-query attention falls back to LibTorch ops for types the kernel does not cover") {
  torch::manual_seed(6);
  KeyValueCache cache, cache16;
  for (int t = 0; t < 4; ++t) {
    auto k = torch::randn({2, 2, 8}), v = torch::randn({2, 2, 8});
    cache.append(k, v);
    cache16.append(k.to(torch::kBFloat16), v.to(torch::kBFloat16));
  }
  auto q = torch::randn({2, 2, 8});
  auto out16 = attend_cache(q.to(torch::kBFloat16), cache16);
  CHECK(out16.scalar_type() == torch::kBFloat16);
  CHECK(max_abs_diff(out16, attend_cache(q, cache)) < 0.05);  // bfloat16 keeps 8 bits of mantissa
  auto mk = torch::randn({1, 2, 3, 8}), mv = torch::randn({1, 2, 3, 8});
  auto q2 = torch::randn({2, 2, 8});
  auto m16 = attend_memory(q2.to(torch::kBFloat16), mk.to(torch::kBFloat16), mv.to(torch::kBFloat16), {});
  CHECK(max_abs_diff(m16, attend_memory(q2, mk, mv, {})) < 0.05);
}

TEST_CASE("single-query attention refuses a cache or memory whose heads or head size differ from the query's") {
  KeyValueCache cache;
  cache.append(torch::randn({2, 2, 8}), torch::randn({2, 2, 8}));
  CHECK_THROWS(attend_cache(torch::randn({2, 2, 6}), cache));
  CHECK_THROWS(attend_cache(torch::randn({2, 4, 8}), cache));
  auto k = torch::randn({1, 2, 3, 8});
  CHECK_THROWS(attend_memory(torch::randn({2, 2, 6}), k, k, {}));
  CHECK_THROWS(attend_memory(torch::randn({2, 4, 8}), k, k, {}));
  CHECK_NOTHROW(attend_memory(torch::randn({2, 2, 8}), k, k, {}));
}

TEST_CASE("cross-attention of one query position gives the same output and weights with and without autograd") {
  torch::manual_seed(8);
  MultiHeadAttentionOptions o;
  o.d_model = 16;
  o.heads = 4;
  CrossAttention mha(o);
  mha->eval();
  auto memory = torch::randn({2, 5, 16});
  auto valid = torch::ones({2, 5}, torch::kBool);
  valid[0][4] = false;
  auto [k, v] = mha->project_memory(memory);
  auto x = torch::randn({6, 1, 16});  // 3 beams per memory row
  torch::Tensor wa, wb;
  auto a = mha->cross_attend(x, k, v, valid, &wa);
  CHECK(a.requires_grad());
  torch::NoGradGuard no_grad;
  auto b = mha->cross_attend(x, k, v, valid, &wb);
  CHECK(wb.sizes() == wa.sizes());
  CHECK(max_abs_diff(a, b) < 1e-5);
  CHECK(max_abs_diff(wa, wb) < 1e-6);
}

TEST_CASE("preallocated cache: past its initial capacity, after reorders and row drops, it equals dense reordered keys") {
  // 40 positions (the buffers start at 16 and double twice), rows reordered with repeats at every step and
  // dropped now and then, as beam search does; gather() and attention both against the dense reference.
  torch::manual_seed(5);
  const int64_t H = 3, Dh = 8;
  KeyValueCache cache;
  DenseCache dense;
  int64_t N = 9;
  for (int step = 0; step < 40; ++step) {
    auto k = torch::randn({N, H, Dh}), v = torch::randn({N, H, Dh});
    cache.append(k, v);
    dense.append(k, v);
    auto [gk, gv] = cache.gather();
    REQUIRE(torch::equal(gk, dense.k));
    REQUIRE(torch::equal(gv, dense.v));
    auto q = torch::randn({N, H, Dh});
    auto [want, want_w] = naive(q, dense.k, dense.v, {});
    torch::Tensor w;
    CHECK(max_abs_diff(attend_cache(q, cache, &w), want) < 1e-5);
    CHECK(max_abs_diff(w, want_w) < 1e-5);
    const int64_t next = step % 7 == 6 && N > 3 ? N - 2 : N;  // a sentence leaves now and then
    auto rows = torch::randint(0, N, {next}, torch::kLong);
    cache.reorder(rows);
    dense.reorder(rows);
    N = next;
  }
  CHECK(cache.key_buffer().size(0) == 64);
}

TEST_CASE("preallocated cache told its length limit grows no further than the limit, and past it grows on and stays "
          "exact") {
  // As beam search uses it: expect(40) before the first step; the buffer doubles 16 -> 32 and then stops at 40
  // (not 64); 8 steps more than announced double it to 80; gather() equals the dense reference all along, with
  // reorders and rows leaving.
  torch::manual_seed(6);
  const int64_t H = 2, Dh = 4;
  KeyValueCache cache;
  cache.expect(40);
  DenseCache dense;
  int64_t N = 6;
  for (int step = 0; step < 48; ++step) {
    auto k = torch::randn({N, H, Dh}), v = torch::randn({N, H, Dh});
    cache.append(k, v);
    CHECK(cache.key_buffer().size(0) == (step < 16 ? 16 : step < 32 ? 32 : step < 40 ? 40 : 80));
    dense.append(k, v);
    auto [gk, gv] = cache.gather();
    REQUIRE(torch::equal(gk, dense.k));
    REQUIRE(torch::equal(gv, dense.v));
    const int64_t next = step % 9 == 8 && N > 2 ? N - 1 : N;
    auto rows = torch::randint(0, N, {next}, torch::kLong);
    cache.reorder(rows);
    dense.reorder(rows);
    N = next;
  }
  CHECK(cache.key_buffer().size(0) == 80);

  // The announcement counts from the current length, and moves with a rebase.
  KeyValueCache later;
  const auto row = torch::zeros({1, H, Dh});
  for (int t = 0; t < 20; ++t) later.append(row, row);  // 16 slots, then 32
  later.expect(30);                                      // up to position 50
  later.rebase(10);                                      // positions renumbered: up to 40
  for (int t = 0; t < 13; ++t) later.append(row, row);   // fills the 32 slots: the next buffer stops at 40, not 64
  CHECK(later.key_buffer().size(0) == 40);
}

TEST_CASE("preallocated cache: dropped positions are compacted away instead of growing the buffer") {
  // Local attention keeps a window: 100 positions with 5 kept never need more than the initial slots.
  KeyValueCache cache;
  torch::Tensor last_k;
  for (int t = 0; t < 100; ++t) {
    last_k = torch::full({2, 1, 4}, static_cast<float>(t));
    cache.append(last_k, last_k);
    cache.drop_before(t - 4);
    cache.reorder(torch::tensor({1, 0}, torch::kLong));
  }
  CHECK(cache.key_buffer().size(0) == 16);
  CHECK(cache.first() == 95);
  auto [k, v] = cache.gather();
  REQUIRE(k.size(2) == 5);
  for (int j = 0; j < 5; ++j) CHECK(k[0][0][j][0].item<float>() == 95.0f + j);
}

TEST_CASE("preallocated cache on CUDA: gathered keys and attention equal the CPU cache's", "[cuda]") {
  PARLA_REQUIRE_CUDA();
  torch::manual_seed(6);
  const int64_t H = 2, Dh = 16;
  KeyValueCache cpu, gpu;
  int64_t N = 6;
  for (int step = 0; step < 20; ++step) {
    auto k = torch::randn({N, H, Dh}), v = torch::randn({N, H, Dh});
    cpu.append(k, v);
    gpu.append(k.to(torch::kCUDA), v.to(torch::kCUDA));
    auto [ck, cv] = cpu.gather();
    auto [gk, gv] = gpu.gather();
    REQUIRE(torch::equal(gk.cpu(), ck));
    REQUIRE(torch::equal(gv.cpu(), cv));
    auto q = torch::randn({N, H, Dh});
    CHECK(max_abs_diff(attend_cache(q.to(torch::kCUDA), gpu).cpu(), attend_cache(q, cpu)) < 1e-4);
    const int64_t next = step % 5 == 4 ? N - 1 : N;
    auto rows = torch::randint(0, N, {next}, torch::kLong);
    cpu.reorder(rows);
    gpu.reorder(rows.to(torch::kCUDA));
    N = next;
  }
}

TEST_CASE("preallocated cache: a reorder to more rows than its buffer holds widens the buffer") {
  torch::manual_seed(8);
  const int64_t H = 1, Dh = 4;
  KeyValueCache cache;
  torch::Tensor dense;
  int64_t N = 2;
  for (int step = 0; step < 20; ++step) {
    auto k = torch::randn({N, H, Dh});
    cache.append(k, k);
    dense = dense.defined() ? torch::cat({dense, k.unsqueeze(2)}, 2) : k.unsqueeze(2);
    REQUIRE(torch::equal(cache.gather().first, dense));
    const int64_t next = step == 5 || step == 17 ? N + 3 : N;  // step 17: just after the buffer grew to 32
    auto rows = torch::randint(0, N, {next}, torch::kLong);
    cache.reorder(rows);
    dense = dense.index_select(0, rows);
    N = next;
  }
}

TEST_CASE("continuous batching: a row that joins a running cache attends only to its own positions, bit for bit "
          "as in a cache of its own, also after the cache is renumbered") {
  torch::manual_seed(12);
  const int64_t H = 2, Dh = 11;
  for (auto dtype : {torch::kFloat, torch::kDouble, torch::kBFloat16}) {
    // `running` starts with 3 rows; 2 rows join after 5 steps; after 9 steps positions before 5 are forgotten
    // (every row still there started at 5 or later). `alone` holds only the joined rows' history.
    KeyValueCache running, alone;
    for (int step = 0; step < 14; ++step) {
      if (step == 5) running.add_rows(2);
      if (step == 9) {
        running.reorder(torch::tensor({3, 4}, torch::kLong));  // the first three rows leave
        running.rebase(5);
        CHECK(running.length() == 4);
        CHECK(running.row_first().defined());
        CHECK(torch::equal(running.row_first(), torch::zeros({2}, torch::kLong)));
      }
      const int64_t rows = step < 5 ? 3 : step < 9 ? 5 : 2;
      auto k = torch::randn({rows, H, Dh}).to(dtype), v = torch::randn({rows, H, Dh}).to(dtype);
      running.append(k, v);
      if (step >= 5) alone.append(k.narrow(0, rows - 2, 2), v.narrow(0, rows - 2, 2));
      auto q = torch::randn({rows, H, Dh}).to(dtype);
      torch::Tensor w_running, w_alone;
      auto out = attend_cache(q, running, &w_running);
      if (step < 5) continue;
      auto want = attend_cache(q.narrow(0, rows - 2, 2), alone, &w_alone);
      INFO("dtype " << dtype << " step " << step);
      // The kernel (float, double) runs the row's own loop: equal bits. bfloat16 goes through LibTorch's ops
      // with a mask, whose reductions may group the sums differently.
      auto same = [&](const torch::Tensor& a, const torch::Tensor& b) {
        return dtype == torch::kBFloat16 ? max_abs_diff(a.to(torch::kFloat), b.to(torch::kFloat)) < 0.02
                                         : torch::equal(a, b);
      };
      CHECK(same(out.narrow(0, rows - 2, 2), want));
      // Weights: zero before the row's first position, the row's own weights after it.
      auto w = w_running.narrow(0, rows - 2, 2);
      const int64_t skipped = w.size(2) - w_alone.size(2);
      CHECK(skipped >= 0);
      if (skipped > 0) CHECK(w.narrow(2, 0, skipped).abs().max().item<double>() == 0);
      CHECK(same(w.narrow(2, skipped, w_alone.size(2)), w_alone));
      if (step < 9) {
        // The rows that were there from the start still see every position: the dense reference.
        auto [dk, dv] = running.gather();
        auto [ref, ref_w] = naive(q.narrow(0, 0, 3), dk.narrow(0, 0, 3), dv.narrow(0, 0, 3), {});
        CHECK(max_abs_diff(out.narrow(0, 0, 3).to(torch::kDouble), ref) < (dtype == torch::kBFloat16 ? 0.05 : 1e-5));
        (void)ref_w;
      }
    }
  }
}

TEST_CASE("continuous batching: rows joined in a self-attention cache with linear attention start from zero sums") {
  SelfAttentionCache cache;
  cache.state = std::make_unique<LinearDecodingState>();
  auto& sums = LinearDecodingState::of(cache);
  sums.s = torch::ones({2, 1, 3, 3});
  sums.z = torch::ones({2, 1, 3});
  cache.length = 4;
  cache.add_rows(1);
  REQUIRE(sums.s.size(0) == 3);
  CHECK(sums.s[2].abs().sum().item<double>() == 0);
  CHECK(sums.z[2].abs().sum().item<double>() == 0);
  CHECK(sums.s[1].sum().item<double>() == 9);
  cache.rebase(10);  // clamped to the positions it has
  CHECK(cache.length == 0);
}

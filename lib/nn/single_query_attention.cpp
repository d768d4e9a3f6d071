#include "nn/single_query_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "nn/masked_softmax.h"

namespace parla::nn {

// ---- the cache ---------------------------------------------------------------------------------------------

void KeyValueCache::append(const torch::Tensor& k, const torch::Tensor& v) {
  TORCH_CHECK(k.dim() == 3 && v.sizes() == k.sizes(), "KeyValueCache::append: k, v must be [N, H, Dh]");
  const int64_t n = k.size(0);
  TORCH_CHECK(!ancestors_.defined() || ancestors_.size(0) == n, "KeyValueCache::append: ", n, " rows, cache has ",
              ancestors_.size(0));
  keys_.push_back(k.contiguous());
  values_.push_back(v.contiguous());
  auto own = torch::arange(n, torch::dtype(torch::kLong).device(k.device())).unsqueeze(1);
  ancestors_ = ancestors_.defined() ? torch::cat({ancestors_, own}, 1) : own;
}

void KeyValueCache::reorder(const torch::Tensor& rows) {
  if (ancestors_.defined()) ancestors_ = ancestors_.index_select(0, rows.to(ancestors_.device()));
}

void KeyValueCache::drop_before(int64_t position) {
  for (int64_t t = first_; t < std::min(position, length()); ++t) {
    keys_[t] = torch::Tensor();
    values_[t] = torch::Tensor();
  }
  first_ = std::max(first_, std::min(position, length()));
}

std::pair<torch::Tensor, torch::Tensor> KeyValueCache::gather() const {
  TORCH_CHECK(!empty(), "KeyValueCache::gather on an empty cache");
  std::vector<torch::Tensor> ks, vs;
  for (int64_t t = first_; t < length(); ++t) {
    auto rows = ancestors_.select(1, t);
    ks.push_back(keys_[t].index_select(0, rows));
    vs.push_back(values_[t].index_select(0, rows));
  }
  return {torch::stack(ks, 2), torch::stack(vs, 2)};
}

// ---- the kernel --------------------------------------------------------------------------------------------

namespace {

// Where row n, head h finds the key/value of position j: base[j] + row * row_stride + h * head_stride, with
// row = ancestors[n][offset + j] (cache) or n / group (memory).
template <typename T>
struct Plan {
  const T* q = nullptr;  // [N, H, Dh] contiguous
  int64_t heads = 0, dim = 0, positions = 0;
  T scale = 1;
  std::vector<const T*> k_base, v_base;
  int64_t k_row = 0, v_row = 0, k_head = 0, v_head = 0;
  const int64_t* ancestors = nullptr;
  int64_t ancestor_stride = 0, ancestor_offset = 0, group = 1;
  const bool* valid = nullptr;  // [rows, positions] or null
  int64_t valid_row = 0;
  T* out = nullptr;      // [N, H, Dh]
  T* weights = nullptr;  // [N, H, positions] or null
};

// Eight independent partial sums: the compiler vectorizes them without reassociating a float reduction.
template <typename T>
inline __attribute__((always_inline)) T dot(const T* a, const T* b, int64_t n) {
  T acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  T s = 0;
  for (int j = 0; j < 8; ++j) s += acc[j];
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

template <typename T>
inline __attribute__((always_inline)) void rows_impl(const Plan<T>& p, int64_t begin, int64_t end) {
  const T ninf = -std::numeric_limits<T>::infinity();
  std::vector<T> scores(p.positions);
  for (int64_t i = begin; i < end; ++i) {
    const int64_t n = i / p.heads, h = i % p.heads;
    const T* q = p.q + i * p.dim;
    T* out = p.out + i * p.dim;
    auto row_of = [&](int64_t j) {
      return p.ancestors ? p.ancestors[n * p.ancestor_stride + p.ancestor_offset + j] : n / p.group;
    };
    T best = ninf;
    for (int64_t j = 0; j < p.positions; ++j) {
      const int64_t row = row_of(j);
      if (p.valid && !p.valid[row * p.valid_row + j]) {
        scores[j] = ninf;
        continue;
      }
      scores[j] = dot(q, p.k_base[j] + row * p.k_row + h * p.k_head, p.dim) * p.scale;
      best = std::max(best, scores[j]);
    }
    for (int64_t d = 0; d < p.dim; ++d) out[d] = 0;
    T* w = p.weights ? p.weights + i * p.positions : nullptr;
    if (best == ninf) {  // no valid key (or all scores -inf): nothing to attend to
      if (w)
        for (int64_t j = 0; j < p.positions; ++j) w[j] = 0;
      continue;
    }
    T z = 0;
    for (int64_t j = 0; j < p.positions; ++j) {
      scores[j] = scores[j] == ninf ? T(0) : std::exp(scores[j] - best);
      z += scores[j];
    }
    const T inv = T(1) / z;
    for (int64_t j = 0; j < p.positions; ++j) {
      const T a = scores[j] * inv;
      if (w) w[j] = a;
      if (a == 0) continue;
      const T* v = p.v_base[j] + row_of(j) * p.v_row + h * p.v_head;
      for (int64_t d = 0; d < p.dim; ++d) out[d] += a * v[d];
    }
  }
}

// The float kernel is compiled twice, for AVX2+FMA CPUs and for any x86-64, and picked at load time.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
void rows_f32(const Plan<float>& p, int64_t begin, int64_t end) {
  rows_impl(p, begin, end);
}

void rows_f64(const Plan<double>& p, int64_t begin, int64_t end) { rows_impl(p, begin, end); }

template <typename T>
void run(const Plan<T>& p, int64_t rows) {
  // Enough work per task to pay for a thread hand-off.
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, p.positions * p.dim));
  at::parallel_for(0, rows * p.heads, grain, [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<T, float>)
      rows_f32(p, begin, end);
    else
      rows_f64(p, begin, end);
  });
}

bool direct(const torch::Tensor& q) {
  return q.device().is_cpu() && (q.scalar_type() == torch::kFloat || q.scalar_type() == torch::kDouble);
}

// The same attention with LibTorch ops, for devices and types the kernel does not cover.
torch::Tensor attend_with_ops(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& allowed, torch::Tensor* weights) {
  auto scores = torch::matmul(q.unsqueeze(2), k.transpose(-2, -1)).squeeze(2) / std::sqrt(double(q.size(-1)));
  auto w = masked_softmax(scores, allowed);
  if (weights) *weights = w;
  return torch::matmul(w.unsqueeze(2), v).squeeze(2);
}

}  // namespace

torch::Tensor attend_cache(const torch::Tensor& q, const KeyValueCache& cache, torch::Tensor* weights) {
  TORCH_CHECK(q.dim() == 3 && !cache.empty(), "attend_cache: q must be [N, H, Dh] and the cache non-empty");
  const int64_t N = q.size(0), H = q.size(1), Dh = q.size(2), L = cache.length() - cache.first();
  TORCH_CHECK(cache.ancestors().size(0) == N, "attend_cache: ", N, " query rows, cache has ",
              cache.ancestors().size(0));
  if (!direct(q)) {
    auto [k, v] = cache.gather();
    return attend_with_ops(q, k, v, {}, weights);
  }
  auto qc = q.contiguous();
  auto out = torch::empty_like(qc);
  torch::Tensor w;
  if (weights) w = torch::empty({N, H, L}, q.options());
  auto anc = cache.ancestors().contiguous();
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "attend_cache", [&] {
    Plan<scalar_t> p;
    p.q = qc.data_ptr<scalar_t>();
    p.heads = H;
    p.dim = Dh;
    p.positions = L;
    p.scale = static_cast<scalar_t>(1.0 / std::sqrt(static_cast<double>(Dh)));
    for (int64_t t = cache.first(); t < cache.length(); ++t) {
      TORCH_CHECK(cache.keys()[t].scalar_type() == q.scalar_type(), "attend_cache: cache and query types differ");
      p.k_base.push_back(cache.keys()[t].data_ptr<scalar_t>());
      p.v_base.push_back(cache.values()[t].data_ptr<scalar_t>());
    }
    p.k_row = p.v_row = H * Dh;
    p.k_head = p.v_head = Dh;
    p.ancestors = anc.data_ptr<int64_t>();
    p.ancestor_stride = anc.size(1);
    p.ancestor_offset = cache.first();
    p.out = out.data_ptr<scalar_t>();
    p.weights = weights ? w.data_ptr<scalar_t>() : nullptr;
    run(p, N);
  });
  if (weights) *weights = w;
  return out;
}

torch::Tensor attend_memory(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const torch::Tensor& key_valid, torch::Tensor* weights) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 4 && v.sizes() == k.sizes(), "attend_memory: q [B, H, Dh], k, v [M, H, S, Dh]");
  const int64_t B = q.size(0), H = q.size(1), Dh = q.size(2), M = k.size(0), S = k.size(2);
  TORCH_CHECK(M > 0 && B % M == 0, "attend_memory: ", B, " query rows for ", M, " memory rows");
  if (!direct(q)) {
    const int64_t G = B / M;
    auto expand = [&](const torch::Tensor& t) { return t.repeat_interleave(G, 0); };
    torch::Tensor allowed;
    if (key_valid.defined()) allowed = expand(key_valid).unsqueeze(1);
    return attend_with_ops(q, expand(k), expand(v), allowed, weights);
  }
  auto qc = q.contiguous();
  auto kc = k.stride(3) == 1 ? k : k.contiguous();
  auto vc = v.stride(3) == 1 ? v : v.contiguous();
  torch::Tensor valid;
  if (key_valid.defined()) valid = key_valid.to(torch::kBool).contiguous();
  auto out = torch::empty_like(qc);
  torch::Tensor w;
  if (weights) w = torch::empty({B, H, S}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "attend_memory", [&] {
    Plan<scalar_t> p;
    p.q = qc.data_ptr<scalar_t>();
    p.heads = H;
    p.dim = Dh;
    p.positions = S;
    p.scale = static_cast<scalar_t>(1.0 / std::sqrt(static_cast<double>(Dh)));
    for (int64_t s = 0; s < S; ++s) {
      p.k_base.push_back(kc.data_ptr<scalar_t>() + s * kc.stride(2));
      p.v_base.push_back(vc.data_ptr<scalar_t>() + s * vc.stride(2));
    }
    p.k_row = kc.stride(0);
    p.v_row = vc.stride(0);
    p.k_head = kc.stride(1);
    p.v_head = vc.stride(1);
    p.group = B / M;
    if (valid.defined()) {
      p.valid = valid.data_ptr<bool>();
      p.valid_row = S;
    }
    p.out = out.data_ptr<scalar_t>();
    p.weights = weights ? w.data_ptr<scalar_t>() : nullptr;
    run(p, B);
  });
  if (weights) *weights = w;
  return out;
}

}  // namespace parla::nn

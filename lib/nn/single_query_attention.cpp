#include "nn/single_query_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "kernels/exp_nonpositive.h"
#include "nn/masked_softmax.h"

namespace parla::nn {

// ---- the cache ---------------------------------------------------------------------------------------------

namespace {
constexpr int64_t kInitialSlots = 16;
}

void KeyValueCache::append(const torch::Tensor& k, const torch::Tensor& v) {
  TORCH_CHECK(k.dim() == 3 && v.sizes() == k.sizes(), "KeyValueCache::append: k, v must be [N, H, Dh]");
  const int64_t n = k.size(0);
  TORCH_CHECK(!ancestors_.defined() || ancestors_.size(0) == n, "KeyValueCache::append: ", n, " rows, cache has ",
              ancestors_.size(0));
  if (key_buffer_.defined())
    TORCH_CHECK(k.scalar_type() == key_buffer_.scalar_type() && v.scalar_type() == key_buffer_.scalar_type() &&
                    k.device() == key_buffer_.device() && k.size(1) == key_buffer_.size(2) &&
                    k.size(2) == key_buffer_.size(3),
                "KeyValueCache::append: type, device, heads or head size differ from the cached positions'");
  const int64_t t = length();
  if (!key_buffer_.defined() || t - base_ >= key_buffer_.size(0) || n > key_buffer_.size(1)) {
    // A new buffer of exactly n rows per slot: the kept positions are copied in already reordered (row r
    // of every position is the current row r's ancestor), so rows of sentences that left the batch are freed
    // and the ancestor table restarts as the identity. An exact copy: attention reads the same numbers.
    // Dropped positions (local attention) free their slots too: the slots double only when more than half
    // of them are still kept.
    const int64_t kept = t - first_;
    int64_t slots = kInitialSlots;
    if (key_buffer_.defined()) {
      slots = key_buffer_.size(0);
      if (t - base_ >= slots && kept + 1 > slots / 2) slots *= 2;
    }
    // Where the length limit is known (expect()) and not yet reached, the buffer never takes more than the
    // positions up to it (kept + 1 <= expected_ - first_, as t < expected_). Not all of them at once: from malloc's
    // heap a buffer sized to the limit reuses pages earlier batches wrote, and a run of many batches kept more
    // resident than with doubling; a mapping of its own per buffer kept less but paid a page fault per written page
    // in every batch (docs/BENCHMARKS.md, "Figures behind the code's choices").
    if (k.device().is_cpu() && expected_ > t) slots = std::min(slots, expected_ - first_);
    // Rows per slot: exactly n, except in a batch that rows join (continuous batching), where a buffer sized
    // to the rows of the moment would be copied again at nearly every join: it grows by half and keeps its
    // size when rows leave.
    int64_t rows = n;
    if (row_first_.defined() && key_buffer_.defined())
      rows = n > key_buffer_.size(1) ? std::max(n, key_buffer_.size(1) * 3 / 2) : key_buffer_.size(1);
    iota_ = torch::arange(rows, torch::dtype(torch::kLong).device(k.device()));
    torch::Tensor index;  // [kept * n]: slot-major, as the new buffer is laid out
    if (kept > 0) {
      const int64_t R = key_buffer_.size(1);
      auto slot = torch::arange(first_ - base_, t - base_, iota_.options()).mul_(R);
      index = (ancestors_.narrow(1, first_, kept).t() + slot.unsqueeze(1)).reshape({-1});
    }
    auto move = [&](const torch::Tensor& like, const torch::Tensor& old, std::vector<torch::Tensor>& views) {
      const int64_t H = like.size(1), Dh = like.size(2);
      auto next = torch::empty({slots, rows, H, Dh}, like.options());
      if (kept > 0)
        next.narrow(0, 0, kept).narrow(1, 0, n).copy_(
            old.view({-1, H, Dh}).index_select(0, index).view({kept, n, H, Dh}));
      for (int64_t p = first_; p < t; ++p) views[p] = next[p - first_];
      return next;
    };
    key_buffer_ = move(k, key_buffer_, keys_);
    value_buffer_ = move(v, value_buffer_, values_);
    if (kept > 0) ancestor_table_.narrow(1, first_, kept).copy_(iota_.narrow(0, 0, n).unsqueeze(1).expand({n, kept}));
    base_ = first_;
  }
  auto key = key_buffer_[t - base_], value = value_buffer_[t - base_];
  if (n < key.size(0)) {
    key = key.narrow(0, 0, n);
    value = value.narrow(0, 0, n);
  }
  // On the CPU, rows whose heads are contiguous (a fused step's views of its qkv buffer, a module's chunk) are
  // copied row by row: a decoder step appends to every layer, and copy_ with its checks and iterator cost more than
  // the copy at a few rows.
  auto rows_contiguous = [](const torch::Tensor& x) {
    return x.device().is_cpu() && x.stride(2) == 1 && x.stride(1) == x.size(2);
  };
  if (rows_contiguous(k) && rows_contiguous(v) && key.device().is_cpu()) {
    const int64_t bytes = k.size(1) * k.size(2) * static_cast<int64_t>(k.element_size());
    auto copy_rows = [&](const torch::Tensor& from, torch::Tensor& to) {
      const char* src = static_cast<const char*>(from.data_ptr());
      char* dst = static_cast<char*>(to.data_ptr());
      const int64_t src_row = from.stride(0) * static_cast<int64_t>(from.element_size());
      for (int64_t r = 0; r < n; ++r) std::memcpy(dst + r * bytes, src + r * src_row, static_cast<size_t>(bytes));
    };
    copy_rows(k, key);
    copy_rows(v, value);
  } else {
    key.copy_(k);
    value.copy_(v);
  }
  keys_.push_back(key);
  values_.push_back(value);

  // The ancestor table: one column per position, doubling like the buffers.
  if (!ancestor_table_.defined() || t >= ancestor_table_.size(1)) {
    auto next = torch::empty({n, std::max<int64_t>(kInitialSlots, 2 * t)}, iota_.options());
    if (t > 0) next.narrow(1, 0, t).copy_(ancestors_);
    ancestor_table_ = next;
  }
  if (ancestor_table_.device().is_cpu()) {
    int64_t* column = ancestor_table_.data_ptr<int64_t>() + t * ancestor_table_.stride(1);
    for (int64_t r = 0; r < n; ++r) column[r * ancestor_table_.stride(0)] = r;
  } else {
    ancestor_table_.select(1, t).copy_(iota_.narrow(0, 0, n));
  }
  ancestors_ = ancestor_table_.narrow(1, 0, t + 1);
}

void KeyValueCache::reorder(const torch::Tensor& rows) {
  if (!ancestor_table_.defined()) return;
  if (ancestor_table_.device().is_cpu() && rows.device().is_cpu() && rows.scalar_type() == torch::kLong &&
      rows.dim() == 1 && rows.is_contiguous() && !row_first_.defined()) {
    // On the CPU, the used columns of the chosen rows copied directly (a beam reorders every layer's table at every
    // step; index_select and its checks cost more than the copy at a few rows).
    const int64_t n = rows.numel(), old_rows = ancestor_table_.size(0), width = ancestor_table_.size(1);
    const int64_t* r = rows.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i)
      TORCH_CHECK(r[i] >= 0 && r[i] < old_rows, "KeyValueCache::reorder: row ", r[i], " of ", old_rows);
    auto next = torch::empty({n, width}, ancestor_table_.options());
    const int64_t used = length(), stride0 = ancestor_table_.stride(0), stride1 = ancestor_table_.stride(1);
    const int64_t* from = ancestor_table_.data_ptr<int64_t>();
    int64_t* to = next.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t t = 0; t < used; ++t) to[i * width + t] = from[r[i] * stride0 + t * stride1];
    ancestor_table_ = next;
    ancestors_ = ancestor_table_.narrow(1, 0, used);
    return;
  }
  // The whole table (at most twice the used columns) in one gather: the unused columns come along unread.
  const auto on_device = rows.to(ancestor_table_.device());
  ancestor_table_ = ancestor_table_.index_select(0, on_device);
  ancestors_ = ancestor_table_.narrow(1, 0, length());
  if (row_first_.defined()) row_first_ = row_first_.index_select(0, on_device);
}

void KeyValueCache::expect(int64_t more) { expected_ = std::max(expected_, length() + more); }

void KeyValueCache::add_rows(int64_t count) {
  // An empty cache has no rows yet: the next append gives every row its own first position.
  if (count <= 0 || !ancestor_table_.defined()) return;
  const auto options = ancestor_table_.options();
  const int64_t n = ancestor_table_.size(0);
  // The new rows' ancestors before they joined are never read; 0 keeps every index in range for the copies
  // that move whole columns (buffer growth, gather).
  ancestor_table_ = torch::cat({ancestor_table_, torch::zeros({count, ancestor_table_.size(1)}, options)});
  ancestors_ = ancestor_table_.narrow(1, 0, length());
  if (!row_first_.defined()) row_first_ = torch::zeros({n}, options);
  row_first_ = torch::cat({row_first_, torch::full({count}, length(), options)});
}

void KeyValueCache::rebase(int64_t position) {
  position = std::min(position, length());
  if (position <= 0) return;
  drop_before(position);
  keys_.erase(keys_.begin(), keys_.begin() + position);
  values_.erase(values_.begin(), values_.begin() + position);
  // Position t becomes t - position everywhere: its slot (t - base) and its ancestor column stay where they are.
  ancestor_table_ = ancestor_table_.narrow(1, position, ancestor_table_.size(1) - position);
  ancestors_ = ancestor_table_.narrow(1, 0, length());
  first_ -= position;
  base_ -= position;
  expected_ = std::max<int64_t>(0, expected_ - position);
  if (row_first_.defined()) row_first_ = (row_first_ - position).clamp_min(0);
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
  // One index_select over the flattened buffers: row n's key at position t sits at slot (t - base) * rows +
  // ancestors[n][t]. The result is laid out as before ([N, H, L, Dh], contiguous), so the slow paths compute
  // exactly what they did.
  const int64_t L = length() - first_, N = ancestors_.size(0), R = key_buffer_.size(1);
  const int64_t H = key_buffer_.size(2), Dh = key_buffer_.size(3);
  auto slots = torch::arange(first_ - base_, first_ - base_ + L, ancestors_.options()).mul_(R);
  auto index = (ancestors_.narrow(1, first_, L) + slots.unsqueeze(0)).reshape({-1});
  auto pick = [&](const torch::Tensor& buffer) {
    return buffer.view({-1, H, Dh}).index_select(0, index).view({N, L, H, Dh}).transpose(1, 2).contiguous();
  };
  return {pick(key_buffer_), pick(value_buffer_)};
}

// ---- the kernel --------------------------------------------------------------------------------------------

namespace {

// Where row n, head h finds the key/value of position j: base[j] + row * row_stride + h * head_stride, with
// row = ancestors[n][offset + j] (cache) or n / group (memory).
template <typename T>
struct Plan {
  const T* q = nullptr;  // [N, H, Dh], heads contiguous within a row, rows q_row apart
  int64_t q_row = 0;
  int64_t heads = 0, dim = 0, positions = 0;
  T scale = 1;
  std::vector<const T*> k_base, v_base;
  int64_t k_row = 0, v_row = 0, k_head = 0, v_head = 0;
  const int64_t* ancestors = nullptr;
  int64_t ancestor_stride = 0, ancestor_offset = 0, group = 1;
  const bool* valid = nullptr;  // [rows, positions] or null
  int64_t valid_row = 0;
  const int64_t* row_first = nullptr;  // [N]: row n reads positions row_first[n] - ancestor_offset.. only
  const int64_t* memory_rows = nullptr;  // [N / group]: the memory row of each group (else the group's own)
  T* out = nullptr;      // [N, H, Dh]
  T* weights = nullptr;  // [N, H, positions] or null
};

#define PARLA_INLINE inline __attribute__((always_inline))

// Explicit 32-byte vectors (GCC/Clang vector extensions): one AVX register in the x86-64-v3 build of the
// kernel, two SSE registers in the baseline one. Loads and stores go through memcpy (unaligned, no aliasing
// games); vectors are only passed by reference, so no function's ABI depends on the target.
template <typename T>
struct Simd {
  typedef T V __attribute__((vector_size(32)));
  static constexpr int64_t kLanes = 32 / sizeof(T);
};

template <typename T, typename V>
PARLA_INLINE void load(V& v, const T* p) {
  std::memcpy(&v, p, sizeof v);
}

template <typename T, typename V>
PARLA_INLINE void store(T* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}

template <typename T, typename V>
PARLA_INLINE T lanes_sum(const V& v) {
  T s = 0;
  for (int64_t j = 0; j < Simd<T>::kLanes; ++j) s += v[j];
  return s;
}

// q . k over n elements; dot4 does four keys at once (four independent chains instead of one). Both sum in
// the same order, so a score does not depend on which of the two computed it.
template <typename T>
PARLA_INLINE T dot(const T* q, const T* k, int64_t n) {
  using V = typename Simd<T>::V;
  constexpr int64_t W = Simd<T>::kLanes;
  V acc = {}, x, y;
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    load(x, q + i);
    load(y, k + i);
    acc += x * y;
  }
  T s = lanes_sum<T>(acc);
  for (; i < n; ++i) s += q[i] * k[i];
  return s;
}

template <typename T>
PARLA_INLINE void dot4(const T* q, const T* const* k, int64_t n, T* out) {
  using V = typename Simd<T>::V;
  constexpr int64_t W = Simd<T>::kLanes;
  V a0 = {}, a1 = {}, a2 = {}, a3 = {}, x, y;
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    load(x, q + i);
    load(y, k[0] + i);
    a0 += x * y;
    load(y, k[1] + i);
    a1 += x * y;
    load(y, k[2] + i);
    a2 += x * y;
    load(y, k[3] + i);
    a3 += x * y;
  }
  T s[4] = {lanes_sum<T>(a0), lanes_sum<T>(a1), lanes_sum<T>(a2), lanes_sum<T>(a3)};
  for (; i < n; ++i)
    for (int c = 0; c < 4; ++c) s[c] += q[i] * k[c][i];
  for (int c = 0; c < 4; ++c) out[c] = s[c];
}

// out[0..n) = sum_j a[j] * v[j][0..n), eight vectors of the output held in registers across all positions.
template <typename T>
PARLA_INLINE void weighted_sum(const T* a, const T* const* v, int64_t L, int64_t n, T* out) {
  using V = typename Simd<T>::V;
  constexpr int64_t W = Simd<T>::kLanes, kBlock = 8 * W;
  int64_t d0 = 0;
  for (; d0 + kBlock <= n; d0 += kBlock) {
    V acc[8] = {}, x;
    for (int64_t j = 0; j < L; ++j) {
      if (a[j] == 0) continue;
      const V w = V{} + a[j];
      for (int u = 0; u < 8; ++u) {
        load(x, v[j] + d0 + u * W);
        acc[u] += w * x;
      }
    }
    for (int u = 0; u < 8; ++u) store(out + d0 + u * W, acc[u]);
  }
  for (; d0 + W <= n; d0 += W) {
    V acc = {}, x;
    for (int64_t j = 0; j < L; ++j) {
      load(x, v[j] + d0);
      acc += (V{} + a[j]) * x;
    }
    store(out + d0, acc);
  }
  for (; d0 < n; ++d0) {
    T acc = 0;
    for (int64_t j = 0; j < L; ++j) acc += a[j] * v[j][d0];
    out[d0] = acc;
  }
}

PARLA_INLINE float exp_shifted(float x, float shift) { return kernels::exp_nonpositive(x - shift); }
PARLA_INLINE double exp_shifted(double x, double shift) { return std::exp(x - shift); }

template <typename T>
PARLA_INLINE void rows_impl(const Plan<T>& p, int64_t begin, int64_t end) {
  const T ninf = -std::numeric_limits<T>::infinity();
  const int64_t L = p.positions;
  std::vector<T> scores(L);
  std::vector<const T*> keys(L), values(L);
  for (int64_t i = begin; i < end; ++i) {
    const int64_t n = i / p.heads, h = i % p.heads;
    const T* q = p.q + n * p.q_row + h * p.dim;
    T* out = p.out + i * p.dim;
    T* w = p.weights ? p.weights + i * p.positions : nullptr;
    // A row that joined a running batch starts at its own first position: the loops below then do exactly
    // what they do for the same row in a batch of its own (same positions, same order), so the result is the
    // same to the bit.
    const int64_t lo = p.row_first ? std::clamp<int64_t>(p.row_first[n] - p.ancestor_offset, 0, L) : 0;
    const int64_t Ln = L - lo;
    if (w)
      for (int64_t j = 0; j < lo; ++j) w[j] = 0;
    if (w) w += lo;
    for (int64_t j = 0; j < Ln; ++j) {
      const int64_t at = lo + j;
      const int64_t row = p.ancestors     ? p.ancestors[n * p.ancestor_stride + p.ancestor_offset + at]
                          : p.memory_rows ? p.memory_rows[n / p.group]
                                          : n / p.group;
      const bool ok = !p.valid || p.valid[row * p.valid_row + at];
      keys[j] = ok ? p.k_base[at] + row * p.k_row + h * p.k_head : nullptr;
      values[j] = p.v_base[at] + row * p.v_row + h * p.v_head;
    }
    int64_t j = 0;
    for (; j + 4 <= Ln; j += 4) {
      if (keys[j] && keys[j + 1] && keys[j + 2] && keys[j + 3]) {
        dot4(q, &keys[j], p.dim, &scores[j]);
      } else {
        for (int64_t c = j; c < j + 4; ++c) scores[c] = keys[c] ? dot(q, keys[c], p.dim) : ninf;
      }
    }
    for (; j < Ln; ++j) scores[j] = keys[j] ? dot(q, keys[j], p.dim) : ninf;
    T best = ninf;
    for (j = 0; j < Ln; ++j) {
      if (scores[j] != ninf) scores[j] *= p.scale;
      best = std::max(best, scores[j]);
    }
    if (best == ninf) {  // no valid key (or all scores -inf): nothing to attend to
      for (int64_t d = 0; d < p.dim; ++d) out[d] = 0;
      if (w)
        for (j = 0; j < Ln; ++j) w[j] = 0;
      continue;
    }
    for (j = 0; j < Ln; ++j) scores[j] = scores[j] == ninf ? T(0) : exp_shifted(scores[j], best);
    T z = 0;
    for (j = 0; j < Ln; ++j) z += scores[j];
    const T inv = T(1) / z;
    for (j = 0; j < Ln; ++j) scores[j] *= inv;
    if (w) std::copy(scores.begin(), scores.begin() + Ln, w);
    weighted_sum(scores.data(), values.data(), Ln, p.dim, out);
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
  // Enough work per task to pay for waking a sleeping thread (OMP_WAIT_POLICY=PASSIVE, runtime::tune_process):
  // ~256k multiply-adds. At 16k, a beam-5 batch-1 step split its 20 head rows over two threads and was slower than
  // one (docs/BENCHMARKS.md, "Figures behind the code's choices"); batches of 64 keep splitting.
  const int64_t grain = std::max<int64_t>(1, 262144 / std::max<int64_t>(1, p.positions * p.dim));
  at::parallel_for(0, rows * p.heads, grain, [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<T, float>)
      rows_f32(p, begin, end);
    else
      rows_f64(p, begin, end);
  });
}

// The fields both entry points fill alike: query, shape, scale and outputs.
template <typename T>
Plan<T> plan_for(const torch::Tensor& q, int64_t positions, torch::Tensor& out, torch::Tensor* weights) {
  Plan<T> p;
  p.q = q.data_ptr<T>();
  p.heads = q.size(1);
  p.dim = q.size(2);
  p.q_row = p.heads * p.dim;
  p.positions = positions;
  p.scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(p.dim)));
  p.out = out.data_ptr<T>();
  p.weights = weights ? weights->data_ptr<T>() : nullptr;
  return p;
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

namespace {

// The cache's part of a plan: keys and values per position, the ancestor table, the rows' first positions.
// `holders` keep alive what had to be made contiguous.
template <typename T>
void plan_cache(Plan<T>& p, const KeyValueCache& cache, int64_t H, int64_t Dh, c10::ScalarType type,
                torch::Tensor (&holders)[2]) {
  for (int64_t t = cache.first(); t < cache.length(); ++t) {
    const auto& kt = cache.keys()[t];
    TORCH_CHECK(kt.scalar_type() == type && kt.size(1) == H && kt.size(2) == Dh,
                "attend_cache: the cache's type or shape differs from the query's");
    p.k_base.push_back(kt.data_ptr<T>());
    p.v_base.push_back(cache.values()[t].data_ptr<T>());
  }
  p.k_row = p.v_row = H * Dh;
  p.k_head = p.v_head = Dh;
  // The ancestor table is a strided view (rows wider than `length`); the kernel reads it with its row stride.
  holders[0] = cache.ancestors().stride(1) == 1 ? cache.ancestors() : cache.ancestors().contiguous();
  p.ancestors = holders[0].data_ptr<int64_t>();
  p.ancestor_stride = holders[0].stride(0);
  p.ancestor_offset = cache.first();
  if (cache.row_first().defined()) {
    holders[1] = cache.row_first().contiguous();
    p.row_first = holders[1].data_ptr<int64_t>();
  }
}

// The memory's part of a plan: k, v [M, H, S, Dh] with unit stride along Dh, key_valid bool [M, S] contiguous or
// undefined, B query rows.
template <typename T>
void plan_memory(Plan<T>& p, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& valid, int64_t B) {
  const int64_t S = k.size(2);
  for (int64_t s = 0; s < S; ++s) {
    p.k_base.push_back(k.data_ptr<T>() + s * k.stride(2));
    p.v_base.push_back(v.data_ptr<T>() + s * v.stride(2));
  }
  p.k_row = k.stride(0);
  p.v_row = v.stride(0);
  p.k_head = k.stride(1);
  p.v_head = v.stride(1);
  p.group = B / k.size(0);
  if (valid.defined()) {
    p.valid = valid.data_ptr<bool>();
    p.valid_row = S;
  }
}

}  // namespace

torch::Tensor attend_cache(const torch::Tensor& q, const KeyValueCache& cache, torch::Tensor* weights) {
  TORCH_CHECK(q.dim() == 3 && !cache.empty(), "attend_cache: q must be [N, H, Dh] and the cache non-empty");
  const int64_t N = q.size(0), H = q.size(1), Dh = q.size(2), L = cache.length() - cache.first();
  TORCH_CHECK(cache.ancestors().size(0) == N, "attend_cache: ", N, " query rows, cache has ",
              cache.ancestors().size(0));
  if (!direct(q)) {
    auto [k, v] = cache.gather();
    torch::Tensor allowed;  // [N, 1, L]: positions from each row's first on
    if (cache.row_first().defined())
      allowed = torch::arange(cache.first(), cache.length(), cache.row_first().options())
                    .unsqueeze(0)
                    .ge(cache.row_first().unsqueeze(1))
                    .unsqueeze(1)
                    .to(q.device());
    return attend_with_ops(q, k, v, allowed, weights);
  }
  auto qc = q.contiguous();
  auto out = torch::empty_like(qc);
  torch::Tensor w;
  if (weights) w = torch::empty({N, H, L}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "attend_cache", [&] {
    auto p = plan_for<scalar_t>(qc, L, out, weights ? &w : nullptr);
    torch::Tensor holders[2];
    plan_cache(p, cache, H, Dh, q.scalar_type(), holders);
    run(p, N);
  });
  if (weights) *weights = w;
  return out;
}

void attend_cache(const float* q, int64_t q_row, const KeyValueCache& cache, float* out) {
  TORCH_CHECK(!cache.empty() && cache.key_buffer().device().is_cpu(), "attend_cache: an empty or non-CPU cache");
  const int64_t N = cache.ancestors().size(0), H = cache.key_buffer().size(2), Dh = cache.key_buffer().size(3);
  Plan<float> p;
  p.q = q;
  p.q_row = q_row;
  p.heads = H;
  p.dim = Dh;
  p.positions = cache.length() - cache.first();
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));
  p.out = out;
  torch::Tensor holders[2];
  plan_cache(p, cache, H, Dh, torch::kFloat, holders);
  run(p, N);
}

torch::Tensor attend_memory(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const torch::Tensor& key_valid, torch::Tensor* weights) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 4 && v.sizes() == k.sizes(), "attend_memory: q [B, H, Dh], k, v [M, H, S, Dh]");
  const int64_t B = q.size(0), H = q.size(1), M = k.size(0), S = k.size(2);
  TORCH_CHECK(M > 0 && B % M == 0, "attend_memory: ", B, " query rows for ", M, " memory rows");
  TORCH_CHECK(k.size(1) == H && k.size(3) == q.size(2), "attend_memory: heads or head size of q and k differ");
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
    auto p = plan_for<scalar_t>(qc, S, out, weights ? &w : nullptr);
    plan_memory(p, kc, vc, valid, B);
    run(p, B);
  });
  if (weights) *weights = w;
  return out;
}

void attend_memory(const float* q, int64_t q_row, int64_t B, const torch::Tensor& k, const torch::Tensor& v,
                   const torch::Tensor& key_valid, float* out, const torch::Tensor& memory_rows) {
  TORCH_CHECK(k.dim() == 4 && v.sizes() == k.sizes() && k.device().is_cpu() && k.scalar_type() == torch::kFloat &&
                  v.scalar_type() == torch::kFloat && k.stride(3) == 1 && v.stride(3) == 1,
              "attend_memory: k, v float [M, H, S, Dh] on the CPU, unit stride along Dh");
  const int64_t groups = memory_rows.defined() ? memory_rows.numel() : k.size(0);
  TORCH_CHECK(groups > 0 && B % groups == 0, "attend_memory: ", B, " query rows for ", groups, " memory rows");
  if (memory_rows.defined()) {
    TORCH_CHECK(memory_rows.device().is_cpu() && memory_rows.scalar_type() == torch::kLong && memory_rows.dim() == 1 &&
                    memory_rows.is_contiguous(),
                "attend_memory: memory_rows must be contiguous int64 [G] on the CPU");
    const int64_t* m = memory_rows.data_ptr<int64_t>();
    for (int64_t g = 0; g < groups; ++g)
      TORCH_CHECK(m[g] >= 0 && m[g] < k.size(0), "attend_memory: memory row ", m[g], " of ", k.size(0));
  }
  TORCH_CHECK(!key_valid.defined() || (key_valid.scalar_type() == torch::kBool && key_valid.is_contiguous()),
              "attend_memory: key_valid must be contiguous bool");
  Plan<float> p;
  p.q = q;
  p.q_row = q_row;
  p.heads = k.size(1);
  p.dim = k.size(3);
  p.positions = k.size(2);
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.dim)));
  p.out = out;
  plan_memory(p, k, v, key_valid, B);
  if (memory_rows.defined()) {
    p.memory_rows = memory_rows.data_ptr<int64_t>();
    p.group = B / groups;
  }
  run(p, B);
}

}  // namespace parla::nn

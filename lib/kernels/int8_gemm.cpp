#include "kernels/int8_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "core/config/runtime_config.h"
#include "kernels/int8_vnni_rows.h"

namespace parla::kernels::int8 {

namespace {

std::string isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

bool has_vnni(dnnl::cpu_isa isa) {
  return isa == dnnl::cpu_isa::avx2_vnni || isa == dnnl::cpu_isa::avx512_core_vnni ||
         isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

using dt = dnnl::memory::data_type;

// Products below this many multiply-adds run on one thread (measured: bench_int8 at batch 1).
constexpr int64_t kParallelMacs = 4 << 20;

dnnl::memory::desc activations_desc(int64_t m, int64_t k) { return {{m, k}, dt::u8, dnnl::memory::dims{k, 1}}; }
dnnl::memory::desc accumulators_desc(int64_t m, int64_t n) { return {{m, n}, dt::s32, dnnl::memory::dims{n, 1}}; }

// One primitive per (m, weight layout): oneDNN's own cache keys on the primitive, but building the descriptor
// that looks it up costs tens of microseconds, as much as a small product. Each primitive takes its scratchpad
// from the caller (scratchpad_mode::user): in oneDNN's default mode primitives share one scratchpad, and two
// threads running products at once (parla-translate's inter_threads workers) overwrote each other's partial sums.
// Returned by value (handles), since another thread's insertion may reallocate the cache's vectors.
struct Matmul {
  dnnl::memory::desc weights;
  dnnl::matmul primitive;
  dnnl::memory::desc scratchpad;
};

Matmul matmul_for(int64_t m, const dnnl::memory::desc& weights) {
  static std::mutex mutex;
  static std::map<int64_t, std::vector<Matmul>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto& entries = cache[m];
  for (const auto& e : entries)
    if (e.weights == weights) return e;
  const auto dims = weights.dims();  // [k, n]
  // oneDNN fixes a primitive's thread count when it is created. A small product (a few rows) takes less time
  // than waking the other threads for it, so it is created for this thread alone.
  const int threads = omp_get_max_threads();
  const bool alone = m * dims[0] * dims[1] < kParallelMacs;
  if (alone) omp_set_num_threads(1);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::matmul::primitive_desc pd(
      dnnl::matmul::desc(activations_desc(m, dims[0]), weights, accumulators_desc(m, dims[1])), attr, engine());
  entries.push_back({weights, dnnl::matmul(pd), pd.scratchpad_desc()});
  if (alone) omp_set_num_threads(threads);
  return entries.back();
}

}  // namespace

class PackedWeights {
 public:
  int64_t n, k;
  dnnl::memory::desc desc;
  dnnl::memory data;  // owns its buffer
  Panels panels;      // data in the panel layout (kernels/int8_vnni_rows.h), else panels.data is null
};

namespace {

// Products of up to kPanelRows rows run on the panel kernel where it is available, and up to kPanelRowsSmall rows
// where the weights are at most kPanelSmallWeights bytes: up to there the panels were as fast as oneDNN's VNNI
// products or faster, and they need no JIT primitive per row count, which oneDNN builds the first time each occurs
// (docs/BENCHMARKS.md, "Figures behind the code's choices").
constexpr int64_t kPanelRows = 32, kPanelRowsSmall = 64;
constexpr int64_t kPanelSmallWeights = int64_t{4} << 20;

// The panel view of oneDNN's packed weights when their layout is the one int8_vnni_rows.h reads: blocked, inner
// blocks 16 x 64 x 4 over (k, n, k), a 64-input block's 4,096 bytes contiguous, no compensation area.
Panels panels_of(const dnnl::memory& data, const dnnl::memory::desc& desc, int64_t n, int64_t k) {
  const auto& d = desc.data;
  const auto& blk = d.format_desc.blocking;
  const bool layout = d.format_kind == dnnl_blocked && d.ndims == 2 && d.offset0 == 0 && d.extra.flags == 0 &&
                      blk.inner_nblks == 3 && blk.inner_blks[0] == 16 && blk.inner_idxs[0] == 0 &&
                      blk.inner_blks[1] == 64 && blk.inner_idxs[1] == 1 && blk.inner_blks[2] == 4 &&
                      blk.inner_idxs[2] == 0 && blk.strides[0] == 4096 && d.padded_dims[0] >= k &&
                      blk.strides[1] >= d.padded_dims[0] * 64 &&
                      d.padded_dims[1] >= (n + 63) / 64 * 64;
  if (!layout || k % 4 != 0 || !vnni_rows_available()) return {};
  return {static_cast<const int8_t*>(data.get_data_handle()), n, k, blk.strides[1]};
}

}  // namespace

std::shared_ptr<const PackedWeights> pack_weights(const int8_t* b, int64_t n, int64_t k) {
  // b [n, k] row-major is the matrix [k, n] with strides (1, k); the layout is the one oneDNN picks for a
  // 64-row product, which its kernel then reads for any row count.
  dnnl::memory::desc plain({k, n}, dt::s8, dnnl::memory::dims{1, k});
  dnnl::memory::desc any({k, n}, dt::s8, dnnl::memory::format_tag::any);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(activations_desc(64, k), any, accumulators_desc(64, n)),
                                  engine());
  auto packed = std::make_shared<PackedWeights>();
  packed->n = n;
  packed->k = k;
  packed->desc = pd.weights_desc();
  packed->data = dnnl::memory(packed->desc, engine());
  dnnl::memory source(plain, engine(), const_cast<int8_t*>(b));
  dnnl::stream stream(engine());
  dnnl::reorder(source, packed->data).execute(stream, source, packed->data);
  stream.wait();
  packed->panels = panels_of(packed->data, packed->desc, n, k);
  return packed;
}

const ActivationCode& activation_code() {
  static const ActivationCode code = [] {
    const auto isa = dnnl::get_effective_cpu_isa();
    const bool vnni = has_vnni(isa);
    return ActivationCode{vnni ? 127 : 63, vnni ? 128 : 64, isa_name(isa), vnni};
  }();
  return code;
}

bool int8_pays() {
  const auto isa = dnnl::get_effective_cpu_isa();
  return isa != dnnl::cpu_isa::sse41 && isa != dnnl::cpu_isa::avx && isa != dnnl::cpu_isa::all;
}

// target_clones: one build, the loops vectorised for the CPU it runs on.
__attribute__((target_clones("avx512f", "avx2", "default")))
void quantize_activations(const float* x, int64_t rows, int64_t cols, const ActivationCode& code, uint8_t* q,
                          float* scale) {
  const float levels = static_cast<float>(code.levels);
  const int32_t offset = code.offset;
  constexpr int kLanes = 16;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    // Independent per-lane maxima: one running maximum is a float reduction the compiler does not vectorise
    // (bench_int8_gemm, 5 rows, k 1024: 12.5-13.4 -> 8.0-8.6 us a product). The maximum is exact in any order and
    // each value is rounded on its own below, so the codes are a scalar loop's on every ISA.
    // Written with vector types: GCC left the per-lane form scalar (vmaxss per element, half of quantize's time at
    // 64 rows, perf). Each lane keeps std::max's rule (a NaN never replaces the running maximum).
    typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));
    typedef int32_t Bits __attribute__((vector_size(kLanes * sizeof(float))));
    Lanes lane = {};
    int64_t j = 0;
    for (; j + kLanes <= cols; j += kLanes) {
      Bits bits;
      std::memcpy(&bits, xr + j, sizeof bits);
      bits &= 0x7fffffff;  // |x|
      Lanes v;
      std::memcpy(&v, &bits, sizeof v);
      lane = lane < v ? v : lane;
    }
    float m = 0.f;
    for (int l = 0; l < kLanes; ++l) m = std::max(m, lane[l]);
    for (; j < cols; ++j) m = std::max(m, std::fabs(xr[j]));
    const float s = m > 0.f ? m / levels : 1.f, inv = m > 0.f ? levels / m : 1.f;
    scale[r] = s;
    uint8_t* qr = q + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      // round half away from zero, clamped: x / s can exceed levels by an ulp
      float v = std::min(levels, std::max(-levels, xr[c] * inv));
      v += v >= 0.f ? 0.5f : -0.5f;
      qr[c] = static_cast<uint8_t>(static_cast<int32_t>(v) + offset);
    }
  }
}

bool has_panels(const PackedWeights& b) { return b.panels.data != nullptr; }

void unpack_row(const PackedWeights& b, int64_t row, int8_t* out) {
  const Panels& p = b.panels;
  if (!p.data || row < 0 || row >= p.n) throw std::out_of_range("int8 unpack_row: no panels, or row out of range");
  // Channel `row`'s 4 bytes of each 4-input record (kernels/int8_vnni_rows.h).
  const int8_t* at = p.data + (row / 64) * p.group_stride + (row % 64) * 4;
  for (int64_t i = 0; i < p.k / 4; ++i) std::memcpy(out + 4 * i, at + 256 * i, 4);
}

bool on_panels(int64_t m, const PackedWeights& b) {
  // runtime.int8_panels false leaves every product to oneDNN, to compare.
  return applied_runtime().int8_panels && b.panels.data &&
         (m <= kPanelRows || (m <= kPanelRowsSmall && b.n * b.k <= kPanelSmallWeights));
}

void gemm_u8s8s32(int64_t m, const uint8_t* a, const PackedWeights& b, int32_t* acc) {
  if (m == 0 || b.n == 0) return;
  if (on_panels(m, b)) {
    gemm_vnni_rows(m, a, b.panels, acc, m * b.k * b.n >= kParallelMacs && omp_get_max_threads() > 1);
    return;
  }
  // This thread's memory objects and argument map per (m, weight layout), made once: creating three dnnl::memory
  // objects and the map on every call cost a few microseconds, as much as a decoder step's product of five rows.
  // Only the data handles change between calls (memory objects are not shared between threads).
  struct Call {
    dnnl::memory::desc weights;
    Matmul mm;
    dnnl::memory src, dst, scratchpad;
    std::unordered_map<int, dnnl::memory> args;
  };
  thread_local std::map<int64_t, std::vector<std::unique_ptr<Call>>> calls;
  thread_local dnnl::stream stream(engine());
  thread_local std::vector<uint8_t> scratch;  // this thread's scratchpad, grown to the largest product's need
  Call* call = nullptr;
  auto& entries = calls[m];
  for (auto& e : entries)
    if (e->weights == b.desc) call = e.get();
  if (!call) {
    auto c = std::make_unique<Call>();
    c->weights = b.desc;
    c->mm = matmul_for(m, b.desc);
    c->src = dnnl::memory(activations_desc(m, b.k), engine(), DNNL_MEMORY_NONE);
    c->dst = dnnl::memory(accumulators_desc(m, b.n), engine(), DNNL_MEMORY_NONE);
    c->scratchpad = dnnl::memory(c->mm.scratchpad, engine(), DNNL_MEMORY_NONE);
    c->args = {{DNNL_ARG_SRC, c->src}, {DNNL_ARG_DST, c->dst}, {DNNL_ARG_SCRATCHPAD, c->scratchpad}};
    entries.push_back(std::move(c));
    call = entries.back().get();
  }
  if (scratch.size() < call->mm.scratchpad.get_size()) scratch.resize(call->mm.scratchpad.get_size());
  call->src.set_data_handle(const_cast<uint8_t*>(a));
  call->dst.set_data_handle(acc);
  call->scratchpad.set_data_handle(scratch.data());
  call->args[DNNL_ARG_WEIGHTS] = b.data;
  // Some kernels (oneDNN's gemm-based one, on CPUs without VNNI) take the thread count when they run: a small
  // product is run from a one-thread region as well.
  const int threads = omp_get_max_threads();
  const bool alone = m * b.k * b.n < kParallelMacs;
  if (alone) omp_set_num_threads(1);
  call->mm.primitive.execute(stream, call->args);
  stream.wait();
  call->args.erase(DNNL_ARG_WEIGHTS);  // no reference kept to a matrix that may be freed
  if (alone) omp_set_num_threads(threads);
}

__attribute__((target_clones("avx512f", "avx2", "default")))
void dequantize(void* buffer, int64_t m, int64_t n, int offset, const int32_t* column_sum, const float* row_scale,
                const float* column_scale, const float* bias) {
  // memcpy reads and writes each 4-byte cell as its own type (no aliasing of int32 and float); compilers turn
  // these into plain vector loads and stores.
  auto* bytes = static_cast<unsigned char*>(buffer);
  for (int64_t r = 0; r < m; ++r) {
    unsigned char* row = bytes + r * n * 4;
    const float rs = row_scale[r];
    for (int64_t c = 0; c < n; ++c) {
      int32_t a;
      std::memcpy(&a, row + c * 4, 4);
      float y = static_cast<float>(a - offset * column_sum[c]) * (rs * column_scale[c]);
      if (bias) y += bias[c];
      std::memcpy(row + c * 4, &y, 4);
    }
  }
}

}  // namespace parla::kernels::int8

#include "nn/int8_gemm.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>

#include <oneapi/dnnl/dnnl.hpp>

namespace parla::nn::int8 {

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

// One primitive per (m, n, k): oneDNN's own cache keys on the primitive, but building the descriptor that looks it
// up costs tens of microseconds, as much as a small product.
const dnnl::matmul& matmul_for(int64_t m, int64_t n, int64_t k) {
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, int64_t>, dnnl::matmul> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_tuple(m, n, k);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  using dt = dnnl::memory::data_type;
  dnnl::memory::desc a({m, k}, dt::u8, dnnl::memory::dims{k, 1});
  dnnl::memory::desc b({k, n}, dt::s8, dnnl::memory::dims{1, k});  // b [n, k] row-major is [k, n] transposed
  dnnl::memory::desc c({m, n}, dt::s32, dnnl::memory::dims{n, 1});
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine());
  return cache.emplace(key, dnnl::matmul(pd)).first->second;
}

}  // namespace

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

// target_clones: one build, the loop vectorised for the CPU it runs on.
__attribute__((target_clones("avx512f", "avx2", "default")))
void quantize_activations(const float* x, int64_t rows, int64_t cols, const ActivationCode& code, uint8_t* q,
                          float* scale) {
  const float levels = static_cast<float>(code.levels), offset = static_cast<float>(code.offset);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float m = 0.f;
    for (int64_t j = 0; j < cols; ++j) m = std::max(m, std::fabs(xr[j]));
    const float s = m > 0.f ? m / levels : 1.f, inv = m > 0.f ? levels / m : 1.f;
    scale[r] = s;
    uint8_t* qr = q + r * cols;
    for (int64_t j = 0; j < cols; ++j) {
      // round half away from zero, clamped: x / s can exceed levels by an ulp
      float v = std::min(levels, std::max(-levels, xr[j] * inv));
      v += v >= 0.f ? 0.5f : -0.5f;
      qr[j] = static_cast<uint8_t>(static_cast<int32_t>(v) + static_cast<int32_t>(offset));
    }
  }
}

void gemm_u8s8s32(int64_t m, int64_t n, int64_t k, const uint8_t* a, const int8_t* b, int32_t* acc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(acc, acc + m * n, 0);
    return;
  }
  const auto& prim = matmul_for(m, n, k);
  using dt = dnnl::memory::data_type;
  dnnl::memory am({{m, k}, dt::u8, dnnl::memory::dims{k, 1}}, engine(), const_cast<uint8_t*>(a));
  dnnl::memory bm({{k, n}, dt::s8, dnnl::memory::dims{1, k}}, engine(), const_cast<int8_t*>(b));
  dnnl::memory cm({{m, n}, dt::s32, dnnl::memory::dims{n, 1}}, engine(), acc);
  thread_local dnnl::stream stream(engine());
  prim.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  stream.wait();
}

__attribute__((target_clones("avx512f", "avx2", "default")))
void dequantize(const int32_t* acc, int64_t m, int64_t n, int offset, const int32_t* column_sum,
                const float* row_scale, const float* column_scale, const float* bias, float* y) {
  for (int64_t r = 0; r < m; ++r) {
    const int32_t* ar = acc + r * n;
    float* yr = y + r * n;
    const float rs = row_scale[r];
    if (bias) {
      for (int64_t c = 0; c < n; ++c)
        yr[c] = static_cast<float>(ar[c] - offset * column_sum[c]) * (rs * column_scale[c]) + bias[c];
    } else {
      for (int64_t c = 0; c < n; ++c) yr[c] = static_cast<float>(ar[c] - offset * column_sum[c]) * (rs * column_scale[c]);
    }
  }
}

}  // namespace parla::nn::int8

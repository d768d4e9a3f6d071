#include "kernels/int8_vnni_rows.h"

#include <cstring>

#include <immintrin.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

namespace parla::kernels::int8 {

namespace {

constexpr int64_t kGroup = 64;    // channels per group
constexpr int64_t kRecord = 256;  // bytes per 4 inputs of a group
// Records asked for ahead of the one being multiplied (each four cache lines).
constexpr int64_t kPrefetchRecords = 8;

// R rows x 64 channels: 4R accumulators + 4 weight vectors + 1 broadcast of 32 registers for R <= 6. Named accumulators
// and vpdpbusd in assembly: with an array and the intrinsic, GCC 12 copied every accumulator to another register around
// each multiply-add and spilled to the stack (docs/BENCHMARKS.md, "Figures behind the code's choices").
#define PARLA_DOT4(acc, x, w) asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(x), "v"(w))
#define PARLA_ROW(r)                                                \
  if constexpr (R > r) {                                            \
    int32_t four;                                                   \
    std::memcpy(&four, a + r * k + 4 * i, 4);                       \
    const __m512i x = _mm512_set1_epi32(four);                      \
    PARLA_DOT4(c##r##0, x, w0);                                     \
    PARLA_DOT4(c##r##1, x, w1);                                     \
    PARLA_DOT4(c##r##2, x, w2);                                     \
    PARLA_DOT4(c##r##3, x, w3);                                     \
  }
#define PARLA_STORE(r)                                                               \
  if constexpr (R > r) {                                                             \
    const __m512i v[4] = {c##r##0, c##r##1, c##r##2, c##r##3};                       \
    for (int j = 0; j < 4; ++j)                                                      \
      if (mask[j]) _mm512_mask_storeu_epi32(c + r * ldc + 16 * j, mask[j], v[j]);    \
  }

template <int R>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void block(const uint8_t* a, int64_t k, const int8_t* panel,
                                                                  int32_t* c, int64_t ldc, int64_t cols) {
  const __m512i z = _mm512_setzero_si512();
  __m512i c00 = z, c01 = z, c02 = z, c03 = z, c10 = z, c11 = z, c12 = z, c13 = z, c20 = z, c21 = z, c22 = z,
          c23 = z, c30 = z, c31 = z, c32 = z, c33 = z, c40 = z, c41 = z, c42 = z, c43 = z, c50 = z, c51 = z,
          c52 = z, c53 = z;
  const int64_t records = k / 4;
  for (int64_t i = 0; i < records; ++i) {
    const int8_t* w = panel + i * kRecord;
    // An address, not a pointer into the weights: it may lie past their end.
    const auto ahead = reinterpret_cast<uintptr_t>(w) + kPrefetchRecords * kRecord;
    for (int l = 0; l < 4; ++l) _mm_prefetch(reinterpret_cast<const char*>(ahead + 64 * l), _MM_HINT_T0);
    const __m512i w0 = _mm512_loadu_si512(w), w1 = _mm512_loadu_si512(w + 64), w2 = _mm512_loadu_si512(w + 128),
                  w3 = _mm512_loadu_si512(w + 192);
    PARLA_ROW(0) PARLA_ROW(1) PARLA_ROW(2) PARLA_ROW(3) PARLA_ROW(4) PARLA_ROW(5)
  }
  __mmask16 mask[4];
  for (int j = 0; j < 4; ++j) {
    const int64_t left = cols - 16 * j;
    mask[j] = left >= 16 ? __mmask16(0xffff) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
  }
  PARLA_STORE(0) PARLA_STORE(1) PARLA_STORE(2) PARLA_STORE(3) PARLA_STORE(4) PARLA_STORE(5)
}
#undef PARLA_STORE
#undef PARLA_ROW
#undef PARLA_DOT4

constexpr int kRows = 6;

void group_rows(int64_t m, const uint8_t* a, int64_t k, const int8_t* panel, int32_t* c, int64_t ldc,
                int64_t cols) {
  int64_t r = 0;
  for (; r + kRows <= m; r += kRows) block<kRows>(a + r * k, k, panel, c + r * ldc, ldc, cols);
  switch (m - r) {
    case 1: block<1>(a + r * k, k, panel, c + r * ldc, ldc, cols); break;
    case 2: block<2>(a + r * k, k, panel, c + r * ldc, ldc, cols); break;
    case 3: block<3>(a + r * k, k, panel, c + r * ldc, ldc, cols); break;
    case 4: block<4>(a + r * k, k, panel, c + r * ldc, ldc, cols); break;
    case 5: block<5>(a + r * k, k, panel, c + r * ldc, ldc, cols); break;
    default: break;
  }
}

}  // namespace

bool vnni_rows_available() {
  static const bool available = [] {
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vnni"))
      return false;
    const auto isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_vnni || isa == dnnl::cpu_isa::avx512_core_bf16 ||
           isa == dnnl::cpu_isa::avx512_core_amx;
  }();
  return available;
}

void gemm_vnni_rows(int64_t m, const uint8_t* a, const Panels& b, int32_t* acc, bool parallel) {
  const int64_t groups = (b.n + kGroup - 1) / kGroup;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t g = 0; g < groups; ++g)
    group_rows(m, a, b.k, b.data + g * b.group_stride, acc + g * kGroup, b.n,
               b.n - g * kGroup < kGroup ? b.n - g * kGroup : kGroup);
}

}  // namespace parla::kernels::int8

#include "kernels/fp32_gemm.h"

#include <cctype>
#include <cstdlib>
#include <string>

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace parla::kernels::fp32 {

namespace {

constexpr int64_t T = kTileColumns;
// Rows of a tile asked for ahead of the one being multiplied: a weight is read once per product and lives in L3 or
// memory, where the hardware prefetchers alone left the few-row kernels waiting; eight rows ahead was the fastest
// distance measured (docs/BENCHMARKS.md, "Figures behind the code's choices").
constexpr int64_t kPrefetchRows = 8;

// The `lines` cache lines at w, kPrefetchRows tile rows ahead (a hint: past the end of the weights it reads nothing).
inline void ask_ahead(const float* w, int lines) {
  // An address, not a pointer into the weights: it may lie past their end.
  const auto at = reinterpret_cast<uintptr_t>(w) + sizeof(float) * kPrefetchRows * T;
  for (int c = 0; c < lines; ++c) _mm_prefetch(reinterpret_cast<const char*>(at + 64 * c), _MM_HINT_T0);
}

// Each block computes R rows of one tile into y (row stride ldy): out[r][j] = fma chain over i, then + bias[j].

// ---- scalar: the definition the vector paths equal bit for bit ----------------------------------------------

void tile_scalar(const float* x, int64_t m, int64_t k, const float* tile, const float* bias, float* y, int64_t ldy,
                 int64_t cols) {
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      float acc = 0.0f;
      for (int64_t i = 0; i < k; ++i) acc = std::fma(x[r * k + i], tile[i * T + j], acc);
      y[r * ldy + j] = bias ? acc + bias[j] : acc;
    }
}

// ---- AVX-512: R rows x 4 vectors of 16 columns -------------------------------------------------------------

template <int R>
__attribute__((target("avx512f"))) void block_avx512(const float* x, int64_t k, const float* tile,
                                                     const float* bias, float* y, int64_t ldy) {
  __m512 acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t i = 0; i < k; ++i) {
    const float* w = tile + i * T;
    ask_ahead(w, 4);
    const __m512 w0 = _mm512_loadu_ps(w), w1 = _mm512_loadu_ps(w + 16), w2 = _mm512_loadu_ps(w + 32),
                 w3 = _mm512_loadu_ps(w + 48);
    for (int r = 0; r < R; ++r) {
      const __m512 xb = _mm512_set1_ps(x[r * k + i]);
      acc[r][0] = _mm512_fmadd_ps(xb, w0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(xb, w1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(xb, w2, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(xb, w3, acc[r][3]);
    }
  }
  for (int v = 0; v < 4; ++v) {
    const __m512 b = bias ? _mm512_loadu_ps(bias + 16 * v) : _mm512_setzero_ps();
    for (int r = 0; r < R; ++r)
      _mm512_storeu_ps(y + r * ldy + 16 * v, bias ? _mm512_add_ps(acc[r][v], b) : acc[r][v]);
  }
}

constexpr int kRowsAvx512 = 6;  // 6 x 4 accumulators + 4 weight vectors + 1 broadcast of 32 registers

__attribute__((target("avx512f"))) void tile_avx512(const float* x, int64_t m, int64_t k, const float* tile,
                                                   const float* bias, float* y, int64_t ldy) {
  int64_t r = 0;
  for (; r + kRowsAvx512 <= m; r += kRowsAvx512) block_avx512<kRowsAvx512>(x + r * k, k, tile, bias, y + r * ldy, ldy);
  switch (m - r) {
    case 1: block_avx512<1>(x + r * k, k, tile, bias, y + r * ldy, ldy); break;
    case 2: block_avx512<2>(x + r * k, k, tile, bias, y + r * ldy, ldy); break;
    case 3: block_avx512<3>(x + r * k, k, tile, bias, y + r * ldy, ldy); break;
    case 4: block_avx512<4>(x + r * k, k, tile, bias, y + r * ldy, ldy); break;
    case 5: block_avx512<5>(x + r * k, k, tile, bias, y + r * ldy, ldy); break;
    default: break;
  }
}

// ---- AVX2 with FMA: R rows x 2 vectors of 8 columns, a tile in four quarters ---------------------------------

// Six rows of two vectors: 12 accumulators, 2 weight loads and 6 broadcasts per step of k, and a block of up to six
// rows reads its 16-column strip of the tile once (the earlier three rows of four vectors read a half tile once per
// three rows: twice at five; docs/BENCHMARKS.md, "Figures behind the code's choices").
template <int R>
__attribute__((target("avx2,fma"))) void block_avx2(const float* x, int64_t k, const float* quarter,
                                                    const float* bias, float* y, int64_t ldy) {
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 2; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k; ++i) {
    const float* w = quarter + i * T;
    ask_ahead(w, 1);
    const __m256 w0 = _mm256_loadu_ps(w), w1 = _mm256_loadu_ps(w + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 xb = _mm256_broadcast_ss(x + r * k + i);
      acc[r][0] = _mm256_fmadd_ps(xb, w0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(xb, w1, acc[r][1]);
    }
  }
  for (int v = 0; v < 2; ++v) {
    const __m256 b = bias ? _mm256_loadu_ps(bias + 8 * v) : _mm256_setzero_ps();
    for (int r = 0; r < R; ++r)
      _mm256_storeu_ps(y + r * ldy + 8 * v, bias ? _mm256_add_ps(acc[r][v], b) : acc[r][v]);
  }
}

constexpr int kRowsAvx2 = 6;  // 6 x 2 accumulators + 2 weight vectors + 1 broadcast of 16 registers

__attribute__((target("avx2,fma"))) void tile_avx2(const float* x, int64_t m, int64_t k, const float* tile,
                                                  const float* bias, float* y, int64_t ldy) {
  for (int64_t h = 0; h < T; h += 16) {
    const float* b = bias ? bias + h : nullptr;
    int64_t r = 0;
    for (; r + kRowsAvx2 <= m; r += kRowsAvx2) block_avx2<kRowsAvx2>(x + r * k, k, tile + h, b, y + r * ldy + h, ldy);
    switch (m - r) {
      case 1: block_avx2<1>(x + r * k, k, tile + h, b, y + r * ldy + h, ldy); break;
      case 2: block_avx2<2>(x + r * k, k, tile + h, b, y + r * ldy + h, ldy); break;
      case 3: block_avx2<3>(x + r * k, k, tile + h, b, y + r * ldy + h, ldy); break;
      case 4: block_avx2<4>(x + r * k, k, tile + h, b, y + r * ldy + h, ldy); break;
      case 5: block_avx2<5>(x + r * k, k, tile + h, b, y + r * ldy + h, ldy); break;
      default: break;
    }
  }
}

void run_tile(const float* x, int64_t m, int64_t k, const float* tile, const float* bias, float* y, int64_t ldy,
              int64_t cols, Isa isa) {
  if (isa == Isa::kScalar) return tile_scalar(x, m, k, tile, bias, y, ldy, cols);
  if (cols == T) {
    if (isa == Isa::kAvx512) return tile_avx512(x, m, k, tile, bias, y, ldy);
    return tile_avx2(x, m, k, tile, bias, y, ldy);
  }
  // The last, partial tile: computed whole (its padding is zeros) into a scratch buffer, in row blocks.
  float b[T] = {};
  if (bias) std::memcpy(b, bias, sizeof(float) * cols);
  float out[kRowsAvx512 * T];
  for (int64_t r = 0; r < m; r += kRowsAvx512) {
    const int64_t rows = std::min<int64_t>(kRowsAvx512, m - r);
    if (isa == Isa::kAvx512)
      tile_avx512(x + r * k, rows, k, tile, bias ? b : nullptr, out, T);
    else
      tile_avx2(x + r * k, rows, k, tile, bias ? b : nullptr, out, T);
    for (int64_t i = 0; i < rows; ++i) std::memcpy(y + (r + i) * ldy, out + i * T, sizeof(float) * cols);
  }
}

}  // namespace

Isa isa_limit(const char* max_cpu_isa) {
  if (!max_cpu_isa) return Isa::kAvx512;
  std::string v(max_cpu_isa);
  for (auto& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v.rfind("avx512", 0) == 0 || v == "all" || v.empty()) return Isa::kAvx512;
  if (v.rfind("avx2", 0) == 0) return Isa::kAvx2;  // avx2, avx2_vnni, avx2_vnni_2
  if (v == "sse41" || v == "avx" || v == "default") return Isa::kScalar;
  return Isa::kAvx512;  // a name oneDNN would reject: no limit
}

Isa best_isa() {
  static const Isa isa = [] {
    __builtin_cpu_init();
    Isa cpu = Isa::kScalar;
    if (__builtin_cpu_supports("avx512f"))
      cpu = Isa::kAvx512;
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      cpu = Isa::kAvx2;
    const char* limit = std::getenv("ONEDNN_MAX_CPU_ISA");
    if (!limit) limit = std::getenv("DNNL_MAX_CPU_ISA");
    return std::min(cpu, isa_limit(limit));
  }();
  return isa;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    default: return "scalar";
  }
}

int64_t tiles(int64_t n) { return (n + T - 1) / T; }

int64_t packed_size(int64_t n, int64_t k) { return tiles(n) * k * T; }

void pack_tile(const float* w, int64_t n, int64_t k, int64_t t, float* packed) {
  float* tile = packed + t * k * T;
  const int64_t width = std::min(T, n - t * T);
  if (width < T) std::fill(tile, tile + k * T, 0.0f);
  for (int64_t j = 0; j < width; ++j) {
    const float* row = w + (t * T + j) * k;
    for (int64_t i = 0; i < k; ++i) tile[i * T + j] = row[i];
  }
}

void pack(const float* w, int64_t n, int64_t k, float* packed) {
  for (int64_t t = 0; t < tiles(n); ++t) pack_tile(w, n, k, t, packed);
}

void unpack_row(const float* packed, int64_t n, int64_t k, int64_t row, float* out) {
  (void)n;
  const float* tile = packed + (row / T) * k * T + row % T;
  for (int64_t i = 0; i < k; ++i) out[i] = tile[i * T];
}

void gemm(const float* x, int64_t m, int64_t k, const float* packed, int64_t n, const float* bias, float* y,
          int64_t tile_begin, int64_t tile_end, Isa isa) {
  if (m <= 0) return;
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    const int64_t c = t * T;
    run_tile(x, m, k, packed + t * k * T, bias ? bias + c : nullptr, y + c, n, std::min(T, n - c), isa);
  }
}

void gemm(const float* x, int64_t m, int64_t k, const float* packed, int64_t n, const float* bias, float* y,
          int threads, Isa isa) {
  const int64_t count = tiles(n);
  const int64_t work = m * k * T * count;
  const int64_t tasks = std::min<int64_t>({std::max(1, threads), count, std::max<int64_t>(1, work >> 23)});
  if (tasks <= 1) return gemm(x, m, k, packed, n, bias, y, 0, count, isa);
  // Threads of this library's OpenMP, sized by the caller (LibTorch's may be another runtime: the 2.x wheel's).
#pragma omp parallel for num_threads(static_cast<int>(tasks)) schedule(static)
  for (int64_t t = 0; t < tasks; ++t) gemm(x, m, k, packed, n, bias, y, count * t / tasks, count * (t + 1) / tasks, isa);
}

}  // namespace parla::kernels::fp32

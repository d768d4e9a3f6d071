#pragma once
// The fp32 product of a linear layer at decoding time, y = x W^T + b, with W packed once as W^T [k, n]. At the
// few rows of a decoder step (beam 5, batch 1: 5 rows) OpenBLAS copies the whole weight into its blocked layout
// on every call, and that copy took twice as long as the product (perf, issue 37: 49% of a batch-1 translation in
// sgemm_incopy, 22% in the product). Here the weight is laid out once and streamed; x stays where it is.
//
// Every output is one chain of fused multiply-adds over k in order, from 0, and then + bias: so the result does
// not depend on how many rows there are, where a row sits in the batch, how the columns are split among threads
// or which instruction set runs it (AVX-512, AVX2 with FMA, or scalar std::fma give the same bits). A sentence
// therefore decodes to the same bits alone and in a batch of 64, on any x86 CPU. Free of LibTorch.
#include <cstdint>

namespace parla::kernels::fp32 {

enum class Isa { kScalar, kAvx2, kAvx512 };
// The fastest this CPU runs (AVX-512F, else AVX2 with FMA, else scalar), no higher than ONEDNN_MAX_CPU_ISA (or
// DNNL_MAX_CPU_ISA) allows: the one switch that puts oneDNN's products and parla's own on a lower instruction set,
// to measure what a CPU without AVX-512 gets.
Isa best_isa();
// The highest ISA a ONEDNN_MAX_CPU_ISA value allows ("AVX2", "avx512_core_vnni", "SSE41", ...; null or unknown:
// no limit), by oneDNN's names.
Isa isa_limit(const char* max_cpu_isa);
const char* isa_name(Isa isa);

// W [n, k] (one row per output, LibTorch's Linear layout) laid out for gemm(): column tiles of 64 outputs, each
// tile k x 64 floats, contiguous (streamed without cache-set conflicts), the last tile padded with zeros.
inline constexpr int64_t kTileColumns = 64;
int64_t packed_size(int64_t n, int64_t k);  // floats
int64_t tiles(int64_t n);
void pack(const float* w, int64_t n, int64_t k, float* packed);
// Tile t alone (rows t * 64 .. of w): pack() is this for every tile, in order.
void pack_tile(const float* w, int64_t n, int64_t k, int64_t t, float* packed);
// Row `row` of W (k floats) read back out of pack()'s layout.
void unpack_row(const float* packed, int64_t n, int64_t k, int64_t row, float* out);

// y[:, tiles tile_begin..tile_end) = x [m, k] * W^T + bias [n] (bias may be null); x's rows are k apart, y's n.
// Callers split [0, tiles(n)) among threads at any boundary.
void gemm(const float* x, int64_t m, int64_t k, const float* packed, int64_t n, const float* bias, float* y,
          int64_t tile_begin, int64_t tile_end, Isa isa);

// The whole product, its tiles split among at most `threads` OpenMP threads (each at least ~1M multiply-adds, so
// a decoder step's small products stay on the calling thread). The split changes no result.
void gemm(const float* x, int64_t m, int64_t k, const float* packed, int64_t n, const float* bias, float* y,
          int threads, Isa isa);

}  // namespace parla::kernels::fp32

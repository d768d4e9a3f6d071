#pragma once
// A float weight matrix laid out once for the decoder's products (kernels/fp32_gemm.h): what nn::Linear, the tied
// output projection of nn::Embedding and a Transformer's own output projection compute with once a model is
// prepared for fp32 decoding on a CPU with AVX-512 (models::pack_fp32). At a decoder step's few rows it is 2-6x
// faster than LibTorch's product, whose BLAS repacks the weight on every call; and each output row is the same,
// bit for bit, alone or in a batch, on any thread count.
#include <cstdint>

#include <torch/types.h>

namespace parla::nn {

struct PackedMatrix {
  torch::Tensor packed;  // float, kernels::fp32::packed_size(rows, cols) elements
  int64_t rows = 0;      // n: outputs
  int64_t cols = 0;      // k: inputs

  // w float [n, k] (CPU).
  static PackedMatrix pack(const torch::Tensor& w);
  // The same, giving w's memory back as it goes (core/memory_pages.h: each tile's rows once packed), so that packing
  // a large table holds it about once rather than twice. w's contents are gone afterwards: only for a weight that
  // is replaced by the result. Falls back to pack() where w shares its memory or is not contiguous float.
  static PackedMatrix pack_consuming(const torch::Tensor& w);
  // The matrix of rows `ids` (int64 [U]) in order, packed (an output projection cut to a shortlist).
  PackedMatrix select_rows(const torch::Tensor& ids) const;
};

// x float [..., k] (CPU) times m^T plus bias (float [n] or undefined) -> float [..., n]; written into *storage when
// given (nn/reused_output.h).
torch::Tensor packed_linear(const torch::Tensor& x, const PackedMatrix& m, const torch::Tensor& bias = {},
                            torch::Tensor* storage = nullptr);
// The same over raw buffers: x [rows, k] -> y [rows, n] (row-major, not overlapping), bias [n] or null.
void packed_linear(const float* x, int64_t rows, const PackedMatrix& m, const float* bias, float* y);

// Whether to decode with packed products, at `intra_threads` LibTorch threads per search: on CPUs with AVX-512F,
// when each search has one or two threads. Measured on a 2-core Xeon VM (docs/BENCHMARKS.md): one thread per search
// 1.1x to 1.9x faster; two threads on one search were 0.8x at batch 1 then (the second core slept between LibTorch's
// parallel operations), and since small steps stay on the calling thread (runtime::SingleThreadScope) they are 2.1x
// at beam 5 batch 1 and 1.25x at batch 64 (2-core AMD EPYC, 2026-11-27). More threads are not measured: left to
// the BLAS.
// On AVX2 (the same machine with ONEDNN_MAX_CPU_ISA=AVX2, OpenBLAS on its Haswell kernels) packing is 1.4x faster at
// beam 5 batch 1 but 0.64x at batch 64 (0.69-0.73x with the six-row AVX2 blocks of 2026-11-26, 1.5x at batch 1),
// so it is not the default there. runtime.packed_fp32 `on` packs at any
// thread count and on AVX2, `off` never (both to compare).
bool packed_fp32_wanted(int intra_threads);

}  // namespace parla::nn

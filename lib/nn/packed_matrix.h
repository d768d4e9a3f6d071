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

// Whether to decode with packed products, at `intra_threads` LibTorch threads per search: on CPUs with AVX-512F, when
// each search has one or two threads, where it was measured faster at every batch size; with more threads the BLAS
// keeps the products, and on AVX2 packing lost at batch 64 (docs/BENCHMARKS.md, "Figures behind the code's choices").
// runtime.packed_fp32 `on` packs at any thread count and on AVX2, `off` never (both to compare).
bool packed_fp32_wanted(int intra_threads);

}  // namespace parla::nn

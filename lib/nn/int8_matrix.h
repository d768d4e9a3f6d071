#pragma once
// A weight matrix in int8 (symmetric, one scale per output channel) and the product with float activations that
// are quantized per row at run time (kernels/int8_gemm.h). Used by nn::Linear and nn::Embedding once a model is
// quantized for decoding (decoding.precision = int8); the same matrix serves as input embedding and, tied, as the
// output projection.
#include <memory>

#include <torch/types.h>

#include "kernels/int8_gemm.h"

namespace parla::nn {

struct Int8Matrix {
  // int8 [n, k], |v| <= 127. Where `packed` has panels (kernels/int8_gemm.h: AVX-512 VNNI) the codes live only
  // there and this tensor keeps just the shape (released_like; codes_in_panels()): read them with codes(),
  // code_rows() or row(), never through values' data.
  torch::Tensor values;
  torch::Tensor scales;       // float [n]: row i of the float matrix is about values[i] * scales[i]
  torch::Tensor column_sums;  // int32 [n]: sum of values[i] (the activation offset is removed with it)
  torch::Tensor fallback;     // float [n, k] dequantized, only on CPUs where int8 does not pay (kernels/int8_gemm.h)
  std::shared_ptr<const kernels::int8::PackedWeights> packed;  // values in the product's own layout (else null)

  // w float [n, k]: scales[i] = max_j |w[i, j]| / 127 (1 for a zero row), values = round(w / scale).
  static Int8Matrix quantize(const torch::Tensor& w);
  // From stored values and scales (an int8 checkpoint); DataError-free: shapes are checked by the caller.
  static Int8Matrix from(torch::Tensor values, torch::Tensor scales);

  // The matrix of rows `ids` (int64 [U]) in order: the same codes and scales (an output projection cut to a
  // shortlist computes the same values for the rows it keeps).
  Int8Matrix select_rows(const torch::Tensor& ids) const;

  // Whether `values` was released because the packed panels hold the codes (from() releases it wherever they do).
  bool codes_in_panels() const;
  // The codes int8 [n, k] (read back out of the panels where they live only there).
  torch::Tensor codes() const;
  // The codes of rows ids (int64 [U]) -> int8 [U, k]; an id outside [0, n) is an error.
  torch::Tensor code_rows(const torch::Tensor& ids) const;
  // Row r's k codes: a pointer into values, or `scratch` (k bytes) filled from the panels.
  const int8_t* row(int64_t r, int8_t* scratch) const;

  int64_t rows() const { return values.size(0); }
  int64_t cols() const { return values.size(1); }
  torch::Tensor dequantized() const;                        // float [n, k]
  torch::Tensor dequantized_rows(const torch::Tensor& ids) const;  // ids int64 [...] -> float [..., k]
};

// x float [..., k] (CPU) times m^T plus bias (float [n] or undefined) -> float [..., n]; written into *storage when
// given and the product runs in int8 (nn/reused_output.h).
torch::Tensor int8_linear(const torch::Tensor& x, const Int8Matrix& m, const torch::Tensor& bias = {},
                          torch::Tensor* storage = nullptr);
// The same over raw buffers: x [rows, k] -> y [rows, n] (row-major, y not overlapping x), bias [n] or null; the same
// bits as the tensor form. Only where the product runs in int8 (m.fallback undefined).
void int8_linear(const float* x, int64_t rows, const Int8Matrix& m, const float* bias, float* y);

// A float tensor with `like`'s shape that owns no memory (one element, zero strides): what a quantized module keeps
// in place of its float weight, so that shape and dtype queries still answer while the memory is freed.
torch::Tensor released_like(const torch::Tensor& like);

}  // namespace parla::nn

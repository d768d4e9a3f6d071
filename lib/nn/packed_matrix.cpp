#include "nn/packed_matrix.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "core/config/runtime_config.h"
#include "core/memory_pages.h"
#include "kernels/fp32_gemm.h"
#include "nn/reused_output.h"

namespace parla::nn {

PackedMatrix PackedMatrix::pack(const torch::Tensor& w) {
  TORCH_CHECK(w.dim() == 2 && w.device().is_cpu(), "PackedMatrix::pack: a CPU matrix [n, k]");
  auto wf = w.detach().to(torch::kFloat).contiguous();
  PackedMatrix m;
  m.rows = wf.size(0);
  m.cols = wf.size(1);
  m.packed = torch::empty({kernels::fp32::packed_size(m.rows, m.cols)}, torch::kFloat);
  kernels::fp32::pack(wf.data_ptr<float>(), m.rows, m.cols, m.packed.data_ptr<float>());
  return m;
}

PackedMatrix PackedMatrix::pack_consuming(const torch::Tensor& w) {
  TORCH_CHECK(w.dim() == 2 && w.device().is_cpu(), "PackedMatrix::pack_consuming: a CPU matrix [n, k]");
  // Only a contiguous float table whose storage no other tensor holds can be given back under its owner.
  if (w.scalar_type() != torch::kFloat || !w.is_contiguous() || w.storage_offset() != 0 ||
      w.storage().use_count() != 1 || static_cast<int64_t>(w.storage().nbytes()) != w.numel() * 4)
    return pack(w);
  PackedMatrix m;
  m.rows = w.size(0);
  m.cols = w.size(1);
  m.packed = torch::empty({kernels::fp32::packed_size(m.rows, m.cols)}, torch::kFloat);
  const float* src = w.data_ptr<float>();
  const int64_t rows_per_tile = kernels::fp32::kTileColumns;
  for (int64_t t = 0; t < kernels::fp32::tiles(m.rows); ++t) {
    kernels::fp32::pack_tile(src, m.rows, m.cols, t, m.packed.data_ptr<float>());
    const int64_t first = t * rows_per_tile, count = std::min(rows_per_tile, m.rows - first);
    release_pages(src + first * m.cols, static_cast<size_t>(count * m.cols) * sizeof(float));
  }
  return m;
}

PackedMatrix PackedMatrix::select_rows(const torch::Tensor& ids) const {
  auto index = ids.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t u = index.numel();
  auto w = torch::empty({u, cols}, torch::kFloat);
  const int64_t* ip = index.data_ptr<int64_t>();
  for (int64_t i = 0; i < u; ++i) {
    TORCH_CHECK(ip[i] >= 0 && ip[i] < rows, "PackedMatrix::select_rows: row ", ip[i], " of ", rows);
    kernels::fp32::unpack_row(packed.data_ptr<float>(), rows, cols, ip[i], w.data_ptr<float>() + i * cols);
  }
  return pack(w);
}

torch::Tensor packed_linear(const torch::Tensor& x, const PackedMatrix& m, const torch::Tensor& bias,
                            torch::Tensor* storage) {
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat,
              "packed fp32 products take float tensors on the CPU");
  TORCH_CHECK(x.size(-1) == m.cols, "packed_linear: input has ", x.size(-1), " features, the matrix ", m.cols);
  const int64_t k = m.cols, n = m.rows;
  auto xf = x.reshape({-1, k}).contiguous();
  const int64_t rows = xf.size(0);
  auto y = reused_output(storage, rows, n);
  torch::Tensor b = bias.defined() ? bias.to(torch::kFloat).contiguous() : torch::Tensor();
  packed_linear(xf.data_ptr<float>(), rows, m, b.defined() ? b.data_ptr<float>() : nullptr, y.data_ptr<float>());
  auto shape = x.sizes().vec();
  shape.back() = n;
  return y.view(shape);
}

void packed_linear(const float* x, int64_t rows, const PackedMatrix& m, const float* bias, float* y) {
  // As many threads as LibTorch's intra-op setting of this thread (runtime.threads).
  kernels::fp32::gemm(x, rows, m.cols, m.packed.data_ptr<float>(), m.rows, bias, y, at::get_num_threads(),
                      kernels::fp32::best_isa());
}

bool packed_fp32_wanted(int intra_threads) {
  const auto isa = kernels::fp32::best_isa();
  if (isa == kernels::fp32::Isa::kScalar) return false;
  switch (applied_runtime().packed_fp32) {
    case PackedFp32::kOff: return false;
    case PackedFp32::kOn: return true;
    case PackedFp32::kAuto: break;
  }
  return intra_threads <= 2 && isa == kernels::fp32::Isa::kAvx512;
}

}  // namespace parla::nn

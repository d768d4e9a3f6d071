#include "nn/int8_matrix.h"

#include <algorithm>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "kernels/int8_gemm.h"
#include "nn/reused_output.h"

namespace parla::nn {

namespace {

// Row sums in int32, by hand: ATen's sum(1, kInt) converted the whole matrix to int32 first, and that memory stayed
// with the process (docs/BENCHMARKS.md, "Figures behind the code's choices").
torch::Tensor row_sums(const torch::Tensor& values) {
  const int64_t n = values.size(0), k = values.size(1);
  auto sums = torch::empty({n}, torch::kInt);
  const int8_t* v = values.data_ptr<int8_t>();
  int32_t* s = sums.data_ptr<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    int32_t total = 0;
    for (int64_t j = 0; j < k; ++j) total += v[i * k + j];
    s[i] = total;
  }
  return sums;
}

}  // namespace

Int8Matrix Int8Matrix::from(torch::Tensor values, torch::Tensor scales) {
  Int8Matrix m;
  m.values = values.to(torch::kCPU, torch::kChar).contiguous();
  m.scales = scales.to(torch::kCPU, torch::kFloat).contiguous();
  m.column_sums = row_sums(m.values);
  if (!kernels::int8::int8_pays() || m.rows() == 0 || m.cols() == 0)
    m.fallback = m.dequantized();
  else
    m.packed = kernels::int8::pack_weights(m.values.data_ptr<int8_t>(), m.rows(), m.cols());
  // One copy of the codes, not two: the panels hold them byte for byte.
  if (m.codes_in_panels()) m.values = released_like(m.values);
  return m;
}

bool Int8Matrix::codes_in_panels() const { return packed && kernels::int8::has_panels(*packed); }

torch::Tensor Int8Matrix::code_rows(const torch::Tensor& ids) const {
  auto index = ids.to(torch::kCPU, torch::kLong).reshape({-1}).contiguous();
  if (!codes_in_panels()) return values.index_select(0, index);
  const int64_t u = index.numel(), n = rows(), k = cols();
  auto out = torch::empty({u, k}, torch::kChar);
  const int64_t* id = index.data_ptr<int64_t>();
  int8_t* o = out.data_ptr<int8_t>();
  for (int64_t i = 0; i < u; ++i) {
    TORCH_CHECK(id[i] >= 0 && id[i] < n, "Int8Matrix: row ", id[i], " of ", n);
    kernels::int8::unpack_row(*packed, id[i], o + i * k);
  }
  return out;
}

torch::Tensor Int8Matrix::codes() const {
  return codes_in_panels() ? code_rows(torch::arange(rows(), torch::kLong)) : values;
}

const int8_t* Int8Matrix::row(int64_t r, int8_t* scratch) const {
  if (!codes_in_panels()) return values.data_ptr<int8_t>() + r * cols();
  kernels::int8::unpack_row(*packed, r, scratch);
  return scratch;
}

Int8Matrix Int8Matrix::quantize(const torch::Tensor& w) {
  TORCH_CHECK(w.dim() == 2, "Int8Matrix::quantize needs a matrix");
  torch::NoGradGuard no_grad;
  auto wf = w.detach().to(torch::kCPU, torch::kFloat);
  const int64_t n = wf.size(0), k = wf.size(1);
  auto scales = torch::empty({n}, torch::kFloat);
  auto values = torch::empty({n, k}, torch::kChar);
  // A block of rows at a time: each row's numbers depend on that row alone, and the float temporaries stay small
  // (whole-matrix ones were 4x the codes at the peak of loading a model in int8).
  const int64_t block = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(k, 1));
  for (int64_t r = 0; r < n; r += block) {
    const int64_t rows = std::min(block, n - r);
    auto part = wf.narrow(0, r, rows);
    auto max = part.abs().amax(1);
    auto s = torch::where(max > 0, max / 127.0, torch::ones_like(max));
    scales.narrow(0, r, rows).copy_(s);
    values.narrow(0, r, rows).copy_((part / s.unsqueeze(1)).round().clamp(-127, 127).to(torch::kChar));
  }
  return from(values, scales);
}

Int8Matrix Int8Matrix::select_rows(const torch::Tensor& ids) const {
  auto index = ids.to(torch::kCPU, torch::kLong);
  return from(code_rows(index), scales.index_select(0, index));
}

torch::Tensor Int8Matrix::dequantized() const { return codes().to(torch::kFloat) * scales.unsqueeze(1); }

torch::Tensor Int8Matrix::dequantized_rows(const torch::Tensor& ids) const {
  auto flat = ids.reshape({-1}).to(torch::kCPU);
  auto rows = code_rows(flat).to(torch::kFloat) * scales.index_select(0, flat).unsqueeze(1);
  auto shape = ids.sizes().vec();
  shape.push_back(cols());
  return rows.view(shape);
}

constexpr int64_t kMinTaskElements = 131072;

torch::Tensor int8_linear(const torch::Tensor& x, const Int8Matrix& m, const torch::Tensor& bias,
                          torch::Tensor* storage) {
  TORCH_CHECK(x.device().is_cpu(), "int8 products run on the CPU");
  TORCH_CHECK(x.size(-1) == m.cols(), "int8_linear: input has ", x.size(-1), " features, the matrix ", m.cols());
  if (m.fallback.defined()) return torch::linear(x.to(torch::kFloat), m.fallback, bias);
  const int64_t k = m.cols(), n = m.rows();
  auto xf = x.to(torch::kFloat).reshape({-1, k}).contiguous();
  const int64_t rows = xf.size(0);
  auto y = reused_output(storage, rows, n);
  torch::Tensor b = bias.defined() ? bias.to(torch::kFloat).contiguous() : torch::Tensor();
  int8_linear(xf.data_ptr<float>(), rows, m, b.defined() ? b.data_ptr<float>() : nullptr, y.data_ptr<float>());
  auto shape = x.sizes().vec();
  shape.back() = n;
  return y.view(shape);
}

void int8_linear(const float* x, int64_t rows, const Int8Matrix& m, const float* bias, float* y) {
  TORCH_CHECK(!m.fallback.defined() && m.packed, "int8_linear: this CPU multiplies the dequantized matrix");
  const int64_t k = m.cols(), n = m.rows();
  const auto& code = kernels::int8::activation_code();
  // The codes and row scales live only during this call: a buffer per thread instead of two tensors per call
  // (at batch 1 a decoder step makes ~25 of these calls, and creating a tensor costs about a microsecond).
  thread_local std::vector<uint8_t> q;
  thread_local std::vector<float> row_scale;
  if (q.size() < static_cast<size_t>(rows * k)) q.resize(rows * k);
  if (row_scale.size() < static_cast<size_t>(rows)) row_scale.resize(rows);
  // The two element-wise passes are memory-bound and, at 320 rows and 8,000 outputs, cost a third of the product:
  // they are split by rows over LibTorch's threads (rows are independent, so the split changes no result), in tasks
  // of at least 128k elements: waking a sleeping thread costs more than a smaller pass (a beam-5 batch-1 step's
  // 5 x 8,000 dequantize split in two made the search slower on two threads than on one).
  uint8_t* qp = q.data();
  float* sp = row_scale.data();
  at::parallel_for(0, rows, std::max<int64_t>(1, kMinTaskElements / k), [&](int64_t begin, int64_t end) {
    kernels::int8::quantize_activations(x + begin * k, end - begin, k, code, qp + begin * k, sp + begin);
  });
  // y holds the int32 accumulators first, then the result in place.
  kernels::int8::gemm_u8s8s32(rows, qp, *m.packed, reinterpret_cast<int32_t*>(y));
  at::parallel_for(0, rows, std::max<int64_t>(1, kMinTaskElements / n), [&](int64_t begin, int64_t end) {
    kernels::int8::dequantize(y + begin * n, end - begin, n, code.offset, m.column_sums.data_ptr<int32_t>(),
                              sp + begin, m.scales.data_ptr<float>(), bias);
  });
}

torch::Tensor released_like(const torch::Tensor& like) {
  return torch::zeros({1}, like.options()).expand(like.sizes());
}

}  // namespace parla::nn

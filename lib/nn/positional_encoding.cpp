#include "nn/positional_encoding.h"

#include <cmath>
#include <limits>
#include <mutex>

#include <torch/torch.h>

#include "core/error.h"
#include "nn/skipped_initialization.h"

namespace parla::nn {

torch::Tensor sinusoidal_table(int64_t length, int64_t dim, int64_t offset, SinusoidalLayout layout) {
  if (layout == SinusoidalLayout::kFairseq) {
    const int64_t half = dim / 2;
    auto pos = torch::arange(offset + 2, offset + 2 + length, torch::kDouble).unsqueeze(1);
    auto freq = torch::exp(torch::arange(half, torch::kDouble) * (-std::log(10000.0) / static_cast<double>(half - 1)));
    auto angle = pos * freq;
    auto table = torch::cat({torch::sin(angle), torch::cos(angle)}, 1);
    if (dim % 2) table = torch::cat({table, torch::zeros({length, 1}, torch::kDouble)}, 1);
    return table.to(torch::kFloat);
  }
  const bool concatenated = layout == SinusoidalLayout::kConcatenated;
  auto pos = torch::arange(offset, offset + length, torch::kDouble).unsqueeze(1);  // [L, 1]
  auto two_i = torch::arange(0, dim, 2, torch::kDouble);                           // 2i
  auto angle = pos * torch::exp(two_i * (-std::log(10000.0) / static_cast<double>(dim)));  // [L, ceil(d/2)]
  if (concatenated)  // ceil(d/2) sines, then floor(d/2) cosines
    return torch::cat({torch::sin(angle), torch::cos(angle).narrow(1, 0, dim / 2)}, 1).to(torch::kFloat);
  auto pe = torch::zeros({length, dim}, torch::kDouble);
  using torch::indexing::None;
  using torch::indexing::Slice;
  pe.index_put_({Slice(), Slice(0, None, 2)}, torch::sin(angle));
  pe.index_put_({Slice(), Slice(1, None, 2)}, torch::cos(angle).narrow(1, 0, dim / 2));
  return pe.to(torch::kFloat);
}

PositionalEncodingImpl::PositionalEncodingImpl(PositionEncoding kind, int64_t max_positions, int64_t dim,
                                               SinusoidalLayout layout)
    : max_positions_(max_positions), dim_(dim), layout_(layout) {
  if (kind == PositionEncoding::kLearned)
    weight = register_parameter("weight", initial_normal_table(max_positions, dim));
}

int64_t PositionalEncodingImpl::max_positions() const {
  return learned() ? max_positions_ : std::numeric_limits<int64_t>::max();
}

torch::Tensor PositionalEncodingImpl::forward(int64_t length, int64_t offset, const torch::TensorOptions& like) {
  if (learned()) {
    if (offset + length > max_positions_)
      throw DataError("sequence of " + std::to_string(offset + length) + " positions is longer than model.max_positions = " +
                      std::to_string(max_positions_) + " (learned positions)");
    return weight.narrow(0, offset, length);
  }
  const auto device = like.device();
  const auto dtype = c10::typeMetaToScalarType(like.dtype());
  // Concurrent searches share the model (parla-translate's inter_threads): one of them grows the table at a time.
  std::lock_guard<std::mutex> lock(*table_mutex_);
  const bool longer = !table_.defined() || table_.size(0) < offset + length;
  if (longer || table_.device() != device || table_.scalar_type() != dtype) {
    // Doubled only when it grows: a change of device or dtype alone keeps the length (doubling then made callers
    // that alternate dtypes double it at every call).
    int64_t n = std::max<int64_t>(offset + length, 256);
    if (table_.defined()) n = std::max<int64_t>(n, longer ? 2 * table_.size(0) : table_.size(0));
    // Computed on the CPU in double and rounded once, so every device gets the same values.
    table_ = sinusoidal_table(n, dim_, 0, layout_).to(device, dtype);
  }
  return table_.narrow(0, offset, length);
}

torch::Tensor PositionalEncodingImpl::at(const torch::Tensor& positions, int64_t bound, const torch::TensorOptions& like) {
  // The whole table up to `bound`, then one row per position: the same values forward(1, p) narrows to.
  const auto table = learned() ? forward(std::min(bound, max_positions_), 0, like) : forward(bound, 0, like);
  return table.index_select(0, positions.to(table.device()));
}

}  // namespace parla::nn

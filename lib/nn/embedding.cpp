#include "nn/embedding.h"

#include <cmath>

#include <torch/torch.h>

#include "core/error.h"

namespace parla::nn {

EmbeddingImpl::EmbeddingImpl(int64_t vocab_size, int64_t dim, bool scale, int64_t pad_id)
    : scale_(scale ? std::sqrt(static_cast<double>(dim)) : 1.0) {
  auto w = torch::randn({vocab_size, dim}) * std::pow(static_cast<double>(dim), -0.5);
  if (pad_id >= 0 && pad_id < vocab_size) w[pad_id].zero_();
  weight = register_parameter("weight", w);
}

torch::Tensor EmbeddingImpl::forward(const torch::Tensor& ids) {
  if (ids.numel() > 0) {
    auto lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
    if (lo < 0 || hi >= vocab_size())
      throw DataError("token id " + std::to_string(lo < 0 ? lo : hi) + " is outside the vocabulary of " +
                      std::to_string(vocab_size()) + " entries");
  }
  auto e = int8_ ? int8_->dequantized_rows(ids) : torch::embedding(weight, ids);
  return scale_ != 1.0 ? e * scale_ : e;
}

torch::Tensor EmbeddingImpl::project(const torch::Tensor& h) {
  if (int8_) return int8_linear(h, *int8_);
  if (packed_) return packed_linear(h, *packed_);
  return torch::matmul(h, weight.t());
}

void EmbeddingImpl::use_packed_projection(PackedMatrix m) {
  TORCH_CHECK(m.rows == weight.size(0) && m.cols == weight.size(1), "use_packed_projection: shape mismatch");
  packed_ = std::make_shared<const PackedMatrix>(std::move(m));
}

void EmbeddingImpl::use_int8(Int8Matrix m) {
  TORCH_CHECK(m.rows() == weight.size(0) && m.cols() == weight.size(1), "use_int8: shape mismatch");
  torch::NoGradGuard no_grad;
  int8_ = std::make_shared<const Int8Matrix>(std::move(m));
  weight.set_data(released_like(weight));
}

}  // namespace parla::nn

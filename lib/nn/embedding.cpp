#include "nn/embedding.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <ATen/record_function.h>
#include <torch/torch.h>

#include "core/error.h"
#include "runtime/operator_counter.h"
#include "kernels/fp32_gemm.h"
#include "nn/skipped_initialization.h"

namespace parla::nn {

namespace {
DataError outside_vocabulary(int64_t id, int64_t vocab) {
  return DataError("token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(vocab) +
                   " entries");
}
}  // namespace

EmbeddingImpl::EmbeddingImpl(int64_t vocab_size, int64_t dim, bool scale, int64_t pad_id)
    : scale_(scale ? std::sqrt(static_cast<double>(dim)) : 1.0) {
  auto w = initial_normal_table(vocab_size, dim);
  if (!initialization_skipped() && pad_id >= 0 && pad_id < vocab_size) w[pad_id].zero_();
  weight = register_parameter("weight", w);
}

torch::Tensor EmbeddingImpl::forward(const torch::Tensor& ids_in) {
  // Packed, the table exists only in the projection's layout: every lookup reads it there (on the CPU).
  const torch::Tensor ids = packed_ ? ids_in.to(torch::kCPU, torch::kLong).contiguous() : ids_in;
  const bool direct = packed_ || (ids.device().is_cpu() && ids.scalar_type() == torch::kLong && ids.is_contiguous() &&
                                  (int8_ ? (int8_->codes_in_panels() || int8_->values.is_contiguous()) &&
                                               int8_->scales.is_contiguous()
                                         : weight.device().is_cpu() && weight.scalar_type() == torch::kFloat &&
                                               weight.is_contiguous() &&
                                               !(torch::GradMode::is_enabled() && weight.requires_grad())));
  if (direct) {
    // On the CPU the rows are copied (and scaled) directly: a decoder step looks up a handful of ids, and the ops
    // below (range check, gather, conversion, products) cost ~15 us there. The same products in the same order:
    // (value * row scale) * scale, so the same bits.
    const int64_t n = ids.numel(), d = weight.size(1), vocab = vocab_size();
    const int64_t* id = ids.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i)
      if (id[i] < 0 || id[i] >= vocab)
        throw outside_vocabulary(id[i], vocab);
    auto shape = ids.sizes().vec();
    shape.push_back(d);
    auto out = torch::empty(shape, torch::kFloat);
    float* o = out.data_ptr<float>();
    const float scale = static_cast<float>(scale_);
    std::vector<int8_t> scratch(int8_ ? d : 0);
    for (int64_t i = 0; i < n; ++i, o += d) {
      if (int8_) {
        const int8_t* v = int8_->row(id[i], scratch.data());
        const float s = int8_->scales.data_ptr<float>()[id[i]];
        for (int64_t j = 0; j < d; ++j) o[j] = static_cast<float>(v[j]) * s;
      } else if (packed_) {
        kernels::fp32::unpack_row(packed_->packed.data_ptr<float>(), vocab, d, id[i], o);
      } else {
        std::copy_n(weight.data_ptr<float>() + id[i] * d, d, o);
      }
      if (scale_ != 1.0)
        for (int64_t j = 0; j < d; ++j) o[j] *= scale;
    }
    return out;
  }
  // On the CPU the ids are checked here; a device would wait for the check at every lookup, so ids bound for one
  // are checked on the host before they go there (data::open_split checks a dataset's against its vocabulary).
  if (ids.numel() > 0 && ids.device().is_cpu()) {
    RECORD_USER_SCOPE(runtime::kHostOnlyScope);  // not a device sync (runtime/operator_counter.h)
    auto lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
    if (lo < 0 || hi >= vocab_size())
      throw outside_vocabulary(lo < 0 ? lo : hi, vocab_size());
  }
  auto e = int8_ ? int8_->dequantized_rows(ids) : torch::embedding(weight, ids);
  return scale_ != 1.0 ? e * scale_ : e;
}

torch::Tensor EmbeddingImpl::project(const torch::Tensor& h, const torch::Tensor& bias, torch::Tensor* storage) {
  if (packed_) return packed_linear(h, *packed_, bias, storage);
  auto logits = int8_ ? int8_linear(h, *int8_, {}, storage) : torch::matmul(h, weight.t());
  return bias.defined() ? logits.add_(bias.to(logits.dtype())) : logits;
}

void EmbeddingImpl::use_packed_projection(PackedMatrix m) {
  TORCH_CHECK(m.rows == weight.size(0) && m.cols == weight.size(1), "use_packed_projection: shape mismatch");
  torch::NoGradGuard no_grad;
  packed_ = std::make_shared<const PackedMatrix>(std::move(m));
  // The packed copy holds the same floats (lookups read them back out of it): one table in memory, not two.
  weight.set_data(released_like(weight));
}

void EmbeddingImpl::use_int8(Int8Matrix m) {
  TORCH_CHECK(m.rows() == weight.size(0) && m.cols() == weight.size(1), "use_int8: shape mismatch");
  torch::NoGradGuard no_grad;
  int8_ = std::make_shared<const Int8Matrix>(std::move(m));
  weight.set_data(released_like(weight));
}

}  // namespace parla::nn

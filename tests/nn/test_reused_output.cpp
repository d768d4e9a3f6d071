// Products written into storage their caller keeps (nn/reused_output.h): the same bits as a fresh output, the kept
// memory used again, and replaced only when a product needs more.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>

#include <torch/torch.h>

#include "nn/int8_matrix.h"
#include "nn/packed_matrix.h"
#include "nn/reused_output.h"

namespace {

bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() &&
         std::memcmp(a.contiguous().data_ptr<float>(), b.contiguous().data_ptr<float>(),
                     static_cast<size_t>(a.numel()) * sizeof(float)) == 0;
}

// `product(x, storage)` with storage null and with one kept storage, over a small batch, a larger one, then the
// small one again.
void check_product(const std::function<torch::Tensor(const torch::Tensor&, torch::Tensor*)>& product, int64_t n) {
  torch::manual_seed(3);
  const auto small = torch::randn({5, 24}), large = torch::randn({9, 24});
  torch::Tensor storage;
  auto y = product(small, &storage);
  REQUIRE(storage.defined());
  CHECK(storage.numel() == 5 * n);
  CHECK(y.data_ptr<float>() == storage.data_ptr<float>());
  CHECK(same_bits(y, product(small, nullptr)));
  y = product(large, &storage);  // too small: replaced by a larger one
  CHECK(storage.numel() == 9 * n);
  CHECK(y.data_ptr<float>() == storage.data_ptr<float>());
  CHECK(same_bits(y, product(large, nullptr)));
  const float* kept = storage.data_ptr<float>();
  y = product(small, &storage);  // fits: the same memory
  CHECK(storage.data_ptr<float>() == kept);
  CHECK(y.data_ptr<float>() == kept);
  CHECK(same_bits(y, product(small, nullptr)));
}

}  // namespace

TEST_CASE("reused output: without storage a fresh tensor, with it a view of the kept memory") {
  const auto fresh = parla::nn::reused_output(nullptr, 3, 4);
  CHECK(fresh.sizes() == torch::IntArrayRef({3, 4}));
  torch::Tensor storage = torch::empty({20});
  const float* kept = storage.data_ptr<float>();
  auto view = parla::nn::reused_output(&storage, 3, 4);
  CHECK(view.sizes() == torch::IntArrayRef({3, 4}));
  CHECK(view.data_ptr<float>() == kept);
  view = parla::nn::reused_output(&storage, 5, 5);  // 25 > 20
  CHECK(storage.numel() == 25);
  CHECK(view.data_ptr<float>() == storage.data_ptr<float>());
}

TEST_CASE("reused output: the packed fp32 product writes into kept storage, with the bits of a fresh output") {
  torch::manual_seed(1);
  const auto w = torch::randn({37, 24}), bias = torch::randn({37});
  const auto m = parla::nn::PackedMatrix::pack(w);
  check_product([&](const torch::Tensor& x, torch::Tensor* s) { return parla::nn::packed_linear(x, m, bias, s); }, 37);
}

TEST_CASE("reused output: the int8 product writes into kept storage, with the bits of a fresh output") {
  torch::manual_seed(2);
  const auto w = torch::randn({37, 24}), bias = torch::randn({37});
  const auto m = parla::nn::Int8Matrix::quantize(w);
  if (m.fallback.defined()) {
    // This CPU multiplies the dequantized matrix (no int8 product): the storage is not used.
    torch::Tensor storage;
    parla::nn::int8_linear(torch::randn({5, 24}), m, bias, &storage);
    CHECK_FALSE(storage.defined());
    return;
  }
  check_product([&](const torch::Tensor& x, torch::Tensor* s) { return parla::nn::int8_linear(x, m, bias, s); }, 37);
}

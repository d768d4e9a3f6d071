// The packed fp32 product (kernels/fp32_gemm.h, nn/packed_matrix.h) against LibTorch's, and its guarantees: the
// same bits on every instruction set, for a row alone or in a batch, on any split among threads.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <limits>

#include <torch/torch.h>

#include "kernels/fp32_gemm.h"
#include "models/factory.h"
#include "models/packed_fp32.h"
#include "models/tiny_config.h"
#include "models/transformer.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/packed_matrix.h"
#include "support/scoped_runtime.h"
#include "support/resident_memory.h"
#include "support/tensors.h"

namespace fp32 = parla::kernels::fp32;
using parla::testing::max_abs_diff;

namespace {

// Instruction sets this CPU can run, the scalar definition first.
std::vector<fp32::Isa> runnable_isas() {
  std::vector<fp32::Isa> out{fp32::Isa::kScalar};
  if (fp32::best_isa() != fp32::Isa::kScalar) out.push_back(fp32::Isa::kAvx2);
  if (fp32::best_isa() == fp32::Isa::kAvx512) out.push_back(fp32::Isa::kAvx512);
  return out;
}

torch::Tensor packed_of(const torch::Tensor& w) {
  auto p = torch::empty({fp32::packed_size(w.size(0), w.size(1))});
  fp32::pack(w.data_ptr<float>(), w.size(0), w.size(1), p.data_ptr<float>());
  return p;
}

torch::Tensor product(const torch::Tensor& x, const torch::Tensor& packed, int64_t n, const torch::Tensor& bias,
                      fp32::Isa isa, int threads = 1) {
  auto y = torch::full({x.size(0), n}, std::numeric_limits<float>::quiet_NaN());
  fp32::gemm(x.data_ptr<float>(), x.size(0), x.size(1), packed.data_ptr<float>(), n,
             bias.defined() ? bias.data_ptr<float>() : nullptr, y.data_ptr<float>(), threads, isa);
  return y;
}

// The forward error bound of a float dot product of length k, with the bias added: |error| <= k u sum |x_i w_i|
// + u |result| (u = 2^-24), taken twice for the reference's own rounding.
torch::Tensor error_bound(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias) {
  const double u = std::ldexp(1.0, -24);
  auto magnitude = torch::matmul(x.abs().to(torch::kDouble), w.abs().t().to(torch::kDouble));
  if (bias.defined()) magnitude = magnitude + bias.abs().to(torch::kDouble);
  return (2 * (x.size(1) + 1) * u * magnitude + 1e-30).to(torch::kFloat);
}

}  // namespace

TEST_CASE("the packed fp32 product is LibTorch's within the rounding bound, on every instruction set, with and "
          "without a bias, whole and partial column tiles") {
  torch::manual_seed(3);
  for (int64_t m : {1, 2, 5, 6, 7, 13}) {
    for (int64_t k : {1, 3, 256, 1030}) {
      for (int64_t n : {1, 15, 64, 65, 200}) {
        auto x = torch::randn({m, k}), w = torch::randn({n, k}), b = torch::randn({n});
        auto packed = packed_of(w);
        for (bool with_bias : {true, false}) {
          auto bias = with_bias ? b : torch::Tensor();
          auto ref = with_bias ? torch::addmm(b, x, w.t()) : torch::matmul(x, w.t());
          auto bound = error_bound(x, w, bias);
          for (auto isa : runnable_isas()) {
            INFO("m " << m << " k " << k << " n " << n << " bias " << with_bias << " " << fp32::isa_name(isa));
            auto y = product(x, packed, n, bias, isa);
            CHECK(((y - ref).abs() <= bound).all().item<bool>());
          }
        }
      }
    }
  }
}

TEST_CASE("the packed fp32 product gives the same bits on every instruction set, for a row alone or among 64, and "
          "on any split of its columns among threads") {
  torch::manual_seed(4);
  const int64_t k = 300, n = 8000 / 3;  // a partial last tile; above the size that splits among threads
  auto x = torch::randn({64, k}), w = torch::randn({n, k}), b = torch::randn({n});
  auto packed = packed_of(w);
  auto scalar = product(x, packed, n, b, fp32::Isa::kScalar);
  for (auto isa : runnable_isas()) {
    INFO(fp32::isa_name(isa));
    CHECK(torch::equal(product(x, packed, n, b, isa), scalar));
    CHECK(torch::equal(product(x, packed, n, b, isa, 2), scalar));
    CHECK(torch::equal(product(x, packed, n, b, isa, 3), scalar));
    for (int64_t r : {0, 5, 63}) {
      auto row = x.narrow(0, r, 1).contiguous();
      CHECK(torch::equal(product(row, packed, n, b, isa)[0], scalar[r]));
      CHECK(torch::equal(product(x.narrow(0, r, std::min<int64_t>(64 - r, 2 + r % 6)).contiguous(), packed, n, b, isa)[0], scalar[r]));
    }
    // Tiles computed one call at a time, in any order, fill the same matrix.
    auto y = torch::full({64, n}, std::numeric_limits<float>::quiet_NaN());
    for (int64_t t = fp32::tiles(n) - 1; t >= 0; --t)
      fp32::gemm(x.data_ptr<float>(), 64, k, packed.data_ptr<float>(), n, b.data_ptr<float>(), y.data_ptr<float>(), t,
                 t + 1, isa);
    CHECK(torch::equal(y, scalar));
  }
}

TEST_CASE("a packed Linear and a packed tied projection compute what they computed before packing") {
  torch::manual_seed(5);
  torch::NoGradGuard no_grad;
  parla::nn::Linear linear(torch::nn::LinearOptions(48, 70));
  auto x = torch::randn({3, 4, 48});
  auto before = linear(x);
  linear->use_packed(parla::nn::PackedMatrix::pack(linear->weight));
  CHECK(linear->weight.sizes() == torch::IntArrayRef({70, 48}));  // the shape stays, the memory is freed
  CHECK(linear->weight.storage().nbytes() < 70 * 48 * 4);
  auto after = linear(x);
  CHECK(after.sizes() == before.sizes());
  CHECK(max_abs_diff(after, before) < 1e-5);

  // 130 rows: three tiles of 64, the last one partial.
  parla::nn::Embedding table(130, 48, true);
  auto h = torch::randn({5, 48});
  auto projected = table->project(h);
  auto ids = torch::tensor({{1, 2, 129}, {64, 63, 128}}, torch::kLong);
  auto looked_up = table(ids);
  auto strided_ids = ids.t();  // not contiguous
  auto looked_up_strided = table(strided_ids);
  table->use_packed_projection(parla::nn::PackedMatrix::pack(table->weight));
  CHECK(max_abs_diff(table->project(h), projected) < 1e-5);
  // The float table is released; lookups read the packed copy, bit for bit, whatever the ids' layout and type.
  CHECK(table->weight.sizes() == torch::IntArrayRef({130, 48}));
  CHECK(table->weight.storage().nbytes() < 130 * 48 * 4);
  CHECK(torch::equal(table(ids), looked_up));
  CHECK(torch::equal(table(strided_ids), looked_up_strided));
  CHECK(torch::equal(table(ids.to(torch::kInt)), looked_up));
  CHECK_THROWS_WITH(table(torch::tensor({130}, torch::kLong)), Catch::Contains("outside the vocabulary"));
}

TEST_CASE("pack_fp32 leaves a model's step log-probabilities within fp32 rounding, and is chosen by thread count "
          "unless runtime.packed_fp32 says otherwise") {
  using parla::testing::ScopedRuntime;
  const bool avx512 = fp32::best_isa() == fp32::Isa::kAvx512;
  CHECK(parla::applied_runtime().packed_fp32 == parla::PackedFp32::kAuto);
  CHECK(parla::nn::packed_fp32_wanted(1) == avx512);
  CHECK(parla::nn::packed_fp32_wanted(2) == avx512);
  CHECK_FALSE(parla::nn::packed_fp32_wanted(3));
  {
    ScopedRuntime off([](parla::RuntimeConfig& rc) { rc.packed_fp32 = parla::PackedFp32::kOff; });
    CHECK_FALSE(parla::nn::packed_fp32_wanted(1));
  }
  ScopedRuntime on([](parla::RuntimeConfig& rc) { rc.packed_fp32 = parla::PackedFp32::kOn; });
  // Forced, it packs on AVX2 too (where it is not the default: 1.4x at batch 1, 0.64x at batch 64).
  CHECK(parla::nn::packed_fp32_wanted(4) == (fp32::best_isa() != fp32::Isa::kScalar));
  if (!avx512) return;  // nothing is packed on this CPU: the model keeps LibTorch's products
  for (bool tied : {true, false}) {
    INFO("tied output " << tied);
    torch::manual_seed(6);
    auto cfg = parla::testing::tiny_transformer();
    cfg.tie_output = tied;
    auto model = std::dynamic_pointer_cast<parla::models::TransformerModel>(parla::models::build_seq2seq(cfg, 20, 24));
    model->eval();
    torch::NoGradGuard no_grad;
    auto src = torch::tensor({{5, 6, 7, 2}, {8, 9, 2, 0}}, torch::kLong);
    auto prev = torch::tensor({2, 2}, torch::kLong);
    auto state = model->start(src);
    auto before = model->step(prev, *state);
    REQUIRE(parla::models::pack_fp32(*model));
    CHECK((tied ? model->tgt_embed->packed_projection() != nullptr : model->output_packed != nullptr));
    auto packed_state = model->start(src);
    CHECK(max_abs_diff(model->step(prev, *packed_state), before) < 1e-5);
  }
}

TEST_CASE("pack_consuming packs as pack() does, gives the table's memory back as it goes, and leaves shared memory "
          "alone") {
  torch::manual_seed(9);
  for (auto shape : {std::pair<int64_t, int64_t>{130, 48}, {64, 7}, {1, 5}}) {
    auto w = torch::randn({shape.first, shape.second});
    const auto want = parla::nn::PackedMatrix::pack(w.clone());
    const auto got = parla::nn::PackedMatrix::pack_consuming(w);
    CHECK(got.rows == want.rows);
    CHECK(got.cols == want.cols);
    CHECK(torch::equal(got.packed, want.packed));
  }
  // Memory another tensor views is not given back: the view still reads the weight.
  auto shared = torch::randn({200, 1024});
  const auto view = shared.view({-1});
  const auto copy = shared.clone();
  const auto packed = parla::nn::PackedMatrix::pack_consuming(shared);
  CHECK(torch::equal(packed.packed, parla::nn::PackedMatrix::pack(copy).packed));
  CHECK(torch::equal(view, copy.view({-1})));

  // A 64 MiB table leaves memory while it is packed: the process grows by far less than the 64 MiB packed copy.
  auto big = torch::randn({4096, 4096});
  const long before = parla::testing::resident_process_kb();
  const auto big_packed = parla::nn::PackedMatrix::pack_consuming(big);
  CHECK(big_packed.packed.numel() == 4096 * 4096);
  CHECK(parla::testing::resident_process_kb() - before < 16 * 1024);
}

TEST_CASE("select_rows of a packed matrix is the packing of those rows: the same products, column for column") {
  torch::manual_seed(8);
  const int64_t n = 150, k = 24;  // three tiles, the last one partial
  auto w = torch::randn({n, k});
  auto m = parla::nn::PackedMatrix::pack(w);
  auto ids = torch::tensor(std::vector<int64_t>{149, 0, 63, 64, 65, 128, 7}, torch::kLong);
  auto cut = m.select_rows(ids);
  CHECK(cut.rows == 7);
  CHECK(cut.cols == k);
  CHECK(torch::equal(cut.packed, parla::nn::PackedMatrix::pack(w.index_select(0, ids)).packed));
  auto x = torch::randn({5, k});
  // Each output is one fma chain over k whatever the columns around it: the cut's products are the whole one's.
  CHECK(torch::equal(parla::nn::packed_linear(x, cut), parla::nn::packed_linear(x, m).index_select(1, ids)));
  CHECK_THROWS(m.select_rows(torch::tensor(std::vector<int64_t>{n}, torch::kLong)));
}

TEST_CASE("ONEDNN_MAX_CPU_ISA caps the packed products' instruction set as it caps oneDNN's") {
  CHECK(fp32::isa_limit(nullptr) == fp32::Isa::kAvx512);
  CHECK(fp32::isa_limit("AVX2") == fp32::Isa::kAvx2);
  CHECK(fp32::isa_limit("avx2_vnni") == fp32::Isa::kAvx2);
  CHECK(fp32::isa_limit("AVX512_CORE_VNNI") == fp32::Isa::kAvx512);
  CHECK(fp32::isa_limit("ALL") == fp32::Isa::kAvx512);
  CHECK(fp32::isa_limit("SSE41") == fp32::Isa::kScalar);
  CHECK(fp32::isa_limit("AVX") == fp32::Isa::kScalar);
  const char* env = std::getenv("ONEDNN_MAX_CPU_ISA");
  CHECK(fp32::best_isa() <= fp32::isa_limit(env));
}

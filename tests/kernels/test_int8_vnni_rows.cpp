// The int8 product against the integer product computed naively: the panel kernel (up to 32 or 64 rows, AVX-512
// VNNI) and oneDNN's (more rows) must give the same exact sums, over shapes with a partial channel group, a k that
// is not a multiple of 64, and the extreme codes (no saturation).
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/int8_gemm.h"
#include "kernels/int8_vnni_rows.h"
#include "support/scoped_runtime.h"

namespace {

using parla::kernels::int8::gemm_u8s8s32;

std::vector<int32_t> naive(int64_t m, int64_t n, int64_t k, const std::vector<uint8_t>& a,
                           const std::vector<int8_t>& b) {
  std::vector<int32_t> c(m * n, 0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      int64_t s = 0;
      for (int64_t i = 0; i < k; ++i) s += int64_t(a[r * k + i]) * int64_t(b[j * k + i]);
      c[r * n + j] = static_cast<int32_t>(s);
    }
  return c;
}

// Activation codes span what quantize_activations writes on this CPU: [offset - levels, offset + levels] (without
// VNNI, pairs of products are summed in int16 and larger codes would saturate there, by design).
void check(int64_t m, int64_t n, int64_t k, std::mt19937& rng, int fill = 0) {
  const auto& code = parla::kernels::int8::activation_code();
  std::uniform_int_distribution<int> ua(code.offset - code.levels, code.offset + code.levels), ub(-127, 127);
  std::vector<uint8_t> a(m * k);
  std::vector<int8_t> b(n * k);
  for (auto& v : a) v = static_cast<uint8_t>(fill ? code.offset + code.levels : ua(rng));
  for (auto& v : b) v = static_cast<int8_t>(fill ? fill : ub(rng));
  auto packed = parla::kernels::int8::pack_weights(b.data(), n, k);
  // Canaries past the end: the kernel writes exactly m x n values.
  std::vector<int32_t> c(m * n + 16, 0x5a5a5a5a);
  gemm_u8s8s32(m, a.data(), *packed, c.data());
  const auto want = naive(m, n, k, a, b);
  INFO("m " << m << " n " << n << " k " << k);
  int64_t wrong = 0;
  for (int64_t i = 0; i < m * n; ++i) wrong += c[i] != want[i];
  CHECK(wrong == 0);
  for (int64_t i = m * n; i < m * n + 16; ++i) CHECK(c[i] == 0x5a5a5a5a);
}

}  // namespace

TEST_CASE("int8 product: exact integer sums at every row count, partial groups and odd k") {
  std::mt19937 rng(37);
  // 4,000 x 256 from 5 rows on is large enough for threads to split the channel groups (where there are several).
  // The panel kernel up to 32 rows, and up to 64 for weights of at most 4 MiB; oneDNN beyond.
  for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 16, 17, 32, 33, 40, 64, 65, 100})
    for (auto nk : {std::pair<int64_t, int64_t>{768, 256}, {100, 64}, {17, 1024}, {1, 4}, {130, 68}, {64, 250},
                    {4000, 256}})
      check(m, nk.first, nk.second, rng);
}

TEST_CASE("int8 product: the extreme codes sum without saturating") {
  std::mt19937 rng(1);
  for (int64_t m : {1, 5, 16, 20}) {
    check(m, 70, 2048, rng, 127);
    check(m, 70, 2048, rng, -127);
  }
}

TEST_CASE("int8 product: the panel kernel runs where the CPU has AVX-512 VNNI") {
  std::vector<int8_t> b(64 * 256, 1);
  auto packed = parla::kernels::int8::pack_weights(b.data(), 64, 256);
  if (!parla::kernels::int8::vnni_rows_available()) {
    WARN("no AVX-512 VNNI here (or ONEDNN_MAX_CPU_ISA below it): only oneDNN's product was checked");
    CHECK_FALSE(parla::kernels::int8::has_panels(*packed));
    return;
  }
  CHECK(parla::kernels::int8::has_panels(*packed));
  CHECK(parla::kernels::int8::on_panels(5, *packed));
  CHECK_FALSE(parla::kernels::int8::on_panels(200, *packed));  // many rows: oneDNN's
  {
    // runtime.int8_panels false: every product on oneDNN, with the same exact sums.
    parla::testing::ScopedRuntime off([](parla::RuntimeConfig& rc) { rc.int8_panels = false; });
    CHECK_FALSE(parla::kernels::int8::on_panels(5, *packed));
    std::mt19937 rng(3);
    for (int64_t m : {1, 5, 17}) check(m, 130, 68, rng);
  }
  CHECK(parla::kernels::int8::on_panels(5, *packed));
  // k not a multiple of 4: the panel kernel reads whole 4-byte groups of a row, so oneDNN multiplies.
  std::vector<int8_t> odd(64 * 250, 1);
  CHECK_FALSE(parla::kernels::int8::has_panels(*parla::kernels::int8::pack_weights(odd.data(), 64, 250)));
}

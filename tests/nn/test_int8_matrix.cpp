// int8 products (nn/int8_matrix.h, kernels/int8_gemm.h) against references computed here in double precision: the error
// bound that follows from the two quantization steps, and the exact integer product for extreme values.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "kernels/int8_gemm.h"
#include "nn/int8_matrix.h"

using parla::nn::Int8Matrix;
using parla::nn::int8_linear;

namespace {

// Round half away from zero, as the quantizers are documented to do.
double round_away(double v) { return v >= 0 ? std::floor(v + 0.5) : -std::floor(-v + 0.5); }

}  // namespace

TEST_CASE("weights quantize per output channel: scale = max|w| / 127, each value within half a step", "[int8]") {
  torch::manual_seed(1);
  auto w = torch::randn({7, 13}) * torch::rand({7, 1}) * 3;
  w[3].zero_();  // a zero row gets scale 1, values 0
  auto m = Int8Matrix::quantize(w);
  REQUIRE(m.codes().scalar_type() == torch::kChar);
  auto wa = w.accessor<float, 2>();
  auto codes = m.codes();
  auto va = codes.accessor<int8_t, 2>();
  for (int64_t i = 0; i < 7; ++i) {
    double max = 0;
    for (int64_t j = 0; j < 13; ++j) max = std::max(max, std::fabs(double(wa[i][j])));
    const double scale = max > 0 ? max / 127 : 1;
    CHECK(m.scales[i].item<float>() == Approx(scale).epsilon(1e-6));
    int64_t sum = 0;
    for (int64_t j = 0; j < 13; ++j) {
      CHECK(std::abs(int(va[i][j])) <= 127);
      CHECK(std::fabs(va[i][j] * scale - wa[i][j]) <= scale / 2 * (1 + 1e-5));
      sum += va[i][j];
    }
    CHECK(m.column_sums[i].item<int32_t>() == sum);
  }
  CHECK(m.codes()[3].abs().sum().item<int64_t>() == 0);
}

TEST_CASE("a matrix quantizes in blocks of rows as the whole-matrix formula does, bit for bit", "[int8]") {
  // 5,000 x 16: blocks of 4,096 rows, one partial; ties (x.5 steps) included, which round() sends to even.
  torch::manual_seed(11);
  for (int64_t k : {16, 1000}) {
    const int64_t n = k == 16 ? 5000 : 300;
    auto w = torch::randn({n, k}) * torch::rand({n, 1}) * 3;
    w[7].zero_();
    w[8].fill_(0.5f);
    w[8][0] = 127.0f;  // scale 1: 0.5 sits on a tie
    auto m = Int8Matrix::quantize(w);
    auto max = w.abs().amax(1);
    auto scales = torch::where(max > 0, max / 127.0, torch::ones_like(max));
    auto codes = (w / scales.unsqueeze(1)).round().clamp(-127, 127).to(torch::kChar);
    CHECK(torch::equal(m.scales, scales));
    CHECK(torch::equal(m.codes(), codes));
  }
}

TEST_CASE("the int8 product is within the error bound that follows from the weight and activation scales", "[int8]") {
  const auto& code = parla::kernels::int8::activation_code();
  torch::manual_seed(2);
  for (auto [rows, n, k] : {std::tuple{1, 1, 1}, {3, 5, 7}, {17, 33, 65}, {64, 200, 256}, {5, 1000, 130}}) {
    auto x = torch::randn({rows, k}) * 2, w = torch::randn({n, k}) * 0.1, b = torch::randn({n});
    if (rows > 2) x[1].zero_();  // an all-zero row
    auto m = Int8Matrix::quantize(w);
    auto y = int8_linear(x, m, b);
    REQUIRE(y.sizes() == torch::IntArrayRef({rows, n}));
    auto xa = x.accessor<float, 2>(), wa = w.accessor<float, 2>(), ya = y.accessor<float, 2>();
    auto sw = m.scales.accessor<float, 1>();
    for (int64_t r = 0; r < rows; ++r) {
      double xmax = 0;
      for (int64_t j = 0; j < k; ++j) xmax = std::max(xmax, std::fabs(double(xa[r][j])));
      const double sa = xmax > 0 ? xmax / code.levels : 1;
      for (int64_t c = 0; c < n; ++c) {
        // |xw - x'w'| <= sum_j |x_j - x'_j| |w_j| + |x'_j| |w_j - w'_j| with |x - x'| <= sa/2, |w - w'| <= sw/2
        double exact = b[c].item<float>(), bound = 0;
        for (int64_t j = 0; j < k; ++j) {
          exact += double(xa[r][j]) * wa[c][j];
          bound += sa / 2 * std::fabs(wa[c][j]) + (std::fabs(xa[r][j]) + sa / 2) * sw[c] / 2;
        }
        const double err = std::fabs(ya[r][c] - exact);
        INFO("rows " << rows << " n " << n << " k " << k << " at " << r << "," << c);
        CHECK(err <= bound * (1 + 1e-4) + 1e-5 * std::fabs(exact));
      }
    }
  }
}

TEST_CASE("the int8 product sums exactly, with extreme values that would saturate 16-bit pair sums", "[int8]") {
  const auto& code = parla::kernels::int8::activation_code();
  // Every activation at +-max and every weight at +-127: the integer reference is computed here in 64 bits.
  for (int64_t k : {4, 64, 1027}) {
    auto x = torch::ones({6, k}) * 3.5, w = torch::ones({9, k}) * 0.25;
    for (int64_t j = 0; j < k; j += 3) x.select(1, j).mul_(-1);
    for (int64_t c = 0; c < 9; c += 2) w[c].mul_(-1);
    w.select(1, 0).mul_(0.5);  // keeps the scale at 0.25 / 127 while varying the values
    auto m = Int8Matrix::quantize(w);
    auto y = int8_linear(x, m);
    auto codes = m.codes();
  auto va = codes.accessor<int8_t, 2>();
    auto xa = x.accessor<float, 2>();
    for (int64_t r = 0; r < 6; ++r) {
      const double sa = 3.5 / code.levels;
      for (int64_t c = 0; c < 9; ++c) {
        int64_t acc = 0;
        for (int64_t j = 0; j < k; ++j) acc += int64_t(round_away(xa[r][j] / sa)) * va[c][j];
        const double ref = double(acc) * sa * m.scales[c].item<float>();
        INFO("k " << k << " at " << r << "," << c);
        CHECK(y[r][c].item<float>() == Approx(ref).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("each row's int8 product is the same, bit for bit, alone and in a batch of 64", "[int8]") {
  torch::manual_seed(3);
  auto x = torch::randn({64, 96}), w = torch::randn({300, 96}), b = torch::randn({300});
  auto m = Int8Matrix::quantize(w);
  auto all = int8_linear(x, m, b);
  for (int64_t r : {0, 1, 31, 63}) CHECK(torch::equal(all[r], int8_linear(x.slice(0, r, r + 1), m, b)[0]));
  // and through a 3-d input, as the decoder passes [B, T, D]
  CHECK(torch::equal(int8_linear(x.view({8, 8, 96}), m, b).view({64, 300}), all));
}

TEST_CASE("dequantized rows are the values times their scales", "[int8]") {
  torch::manual_seed(4);
  auto m = Int8Matrix::quantize(torch::randn({10, 6}));
  auto ids = torch::tensor({{3, 0}, {9, 3}}, torch::kLong);
  auto rows = m.dequantized_rows(ids);
  REQUIRE(rows.sizes() == torch::IntArrayRef({2, 2, 6}));
  for (int64_t j = 0; j < 6; ++j)
    CHECK(rows[1][0][j].item<float>() == float(m.codes()[9][j].item<int8_t>()) * m.scales[9].item<float>());
  CHECK(torch::equal(rows[0][0], rows[1][1]));
}

TEST_CASE("the activation code follows the instruction set oneDNN runs (ONEDNN_MAX_CPU_ISA lowers it)", "[int8]") {
  const auto& code = parla::kernels::int8::activation_code();
  const char* forced = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (forced && std::string(forced) == "AVX2") {
    CHECK(code.isa == "avx2");
  }
  // Without VNNI, pairs of products are summed in 16 bits: 2 * levels_a_shifted * 127 must stay below 32768.
  if (!code.vnni) {
    CHECK(code.levels == 63);
    CHECK(2 * (code.levels + code.offset) * 127 < 32768);
  } else {
    CHECK(code.levels == 127);
  }
  CHECK(code.offset > code.levels);  // quantized values shift into uint8 without wrapping
  CHECK(code.offset + code.levels <= 255);
}

TEST_CASE("activations quantize per row as the scalar formula does, bit for bit, at every width", "[int8]") {
  // scale = max|x| / levels; code = round half away from zero of x * levels / max|x|, clamped, plus the offset.
  // The kernel is vectorised (16 lanes, target clones): widths around the vector length and a zero row.
  const auto& code = parla::kernels::int8::activation_code();
  torch::manual_seed(11);
  for (int64_t cols : {1, 15, 16, 17, 33, 256, 1027}) {
    auto x = torch::randn({4, cols}) * 3;
    x[2].zero_();
    x[3][cols - 1] = -40.f;  // the maximum in the scalar tail
    std::vector<uint8_t> q(4 * cols);
    std::vector<float> scale(4);
    parla::kernels::int8::quantize_activations(x.data_ptr<float>(), 4, cols, code, q.data(), scale.data());
    auto xa = x.accessor<float, 2>();
    const float levels = static_cast<float>(code.levels);
    for (int64_t r = 0; r < 4; ++r) {
      float m = 0.f;
      for (int64_t j = 0; j < cols; ++j) m = std::max(m, std::fabs(xa[r][j]));
      const float s = m > 0.f ? m / levels : 1.f, inv = m > 0.f ? levels / m : 1.f;
      INFO("cols " << cols << " row " << r);
      CHECK(scale[r] == s);
      int wrong = 0;
      for (int64_t j = 0; j < cols; ++j) {
        float v = std::min(levels, std::max(-levels, xa[r][j] * inv));
        const int32_t rounded = v >= 0.f ? static_cast<int32_t>(v + 0.5f) : static_cast<int32_t>(v - 0.5f);
        wrong += q[r * cols + j] != static_cast<uint8_t>(rounded + code.offset);
      }
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("select_rows of an int8 matrix keeps those rows' codes and scales: the same products, column for column",
          "[int8]") {
  torch::manual_seed(9);
  auto m = Int8Matrix::quantize(torch::randn({90, 40}));
  auto ids = torch::tensor(std::vector<int64_t>{89, 3, 0, 45, 46}, torch::kLong);
  auto cut = m.select_rows(ids);
  CHECK(torch::equal(cut.codes(), m.codes().index_select(0, ids)));
  CHECK(torch::equal(cut.scales, m.scales.index_select(0, ids)));
  CHECK(torch::equal(cut.column_sums, m.column_sums.index_select(0, ids)));
  auto x = torch::randn({7, 40});
  // Integer sums are exact and each column is scaled on its own: the cut's products are the whole one's.
  CHECK(torch::equal(int8_linear(x, cut), int8_linear(x, m).index_select(1, ids)));
}

TEST_CASE("where the packed weights have panels they are the only copy of the codes, read back byte for byte",
          "[int8]") {
  torch::manual_seed(10);
  // n across several 64-channel groups and a partial last one; k a multiple of 4 (panels need it) over 64-input blocks.
  for (auto [n, k] : {std::pair<int64_t, int64_t>{200, 96}, {130, 1028}, {64, 4}}) {
    INFO("n " << n << " k " << k);
    auto w = torch::randn({n, k});
    auto m = Int8Matrix::quantize(w);
    // The codes by the documented formula, here: round(w / (max|w| / 127)), half away from zero.
    auto wa = w.accessor<float, 2>();
    std::vector<int8_t> expected(n * k);
    for (int64_t i = 0; i < n; ++i) {
      double max = 0;
      for (int64_t j = 0; j < k; ++j) max = std::max(max, std::fabs(double(wa[i][j])));
      const float scale = m.scales[i].item<float>();
      for (int64_t j = 0; j < k; ++j)
        expected[i * k + j] = static_cast<int8_t>(std::clamp(round_away(wa[i][j] / scale), -127.0, 127.0));
    }
    const bool panels = m.packed && parla::kernels::int8::has_panels(*m.packed);
    CHECK(m.codes_in_panels() == panels);
    // Released where the panels hold the codes (one element, broadcast to the shape), kept whole elsewhere.
    CHECK((m.values.storage().nbytes() <= 1) == panels);
    CHECK(m.values.sizes() == torch::IntArrayRef({n, k}));
    auto all = m.codes();
    REQUIRE(all.sizes() == torch::IntArrayRef({n, k}));
    CHECK(std::equal(expected.begin(), expected.end(), all.data_ptr<int8_t>()));
    std::vector<int8_t> scratch(k);
    for (int64_t r : {int64_t{0}, int64_t{63}, int64_t{64}, n - 1}) {
      if (r >= n) continue;
      INFO("row " << r);
      const int8_t* row = m.row(r, scratch.data());
      CHECK(std::equal(row, row + k, expected.begin() + r * k));
    }
    auto ids = torch::tensor(std::vector<int64_t>{n - 1, 0, n / 2, n - 1}, torch::kLong);
    CHECK(torch::equal(m.code_rows(ids), all.index_select(0, ids)));
    CHECK_THROWS(m.code_rows(torch::tensor(std::vector<int64_t>{n}, torch::kLong)));
    CHECK(torch::equal(m.dequantized(), all.to(torch::kFloat) * m.scales.unsqueeze(1)));
    // A cut keeps the codes of its rows (and repacks them: its own panels where the whole matrix had them).
    auto cut = m.select_rows(ids);
    CHECK(torch::equal(cut.codes(), all.index_select(0, ids)));
    CHECK((cut.values.storage().nbytes() <= 1) == cut.codes_in_panels());
  }
}

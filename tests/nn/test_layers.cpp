// Positional encodings, feed-forward and embeddings against their formulas.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "support/choice.h"
#include "core/error.h"
#include "nn/embedding.h"
#include "nn/feed_forward.h"
#include "nn/positional_encoding.h"
#include "support/cuda.h"

using namespace parla::nn;

TEST_CASE("sinusoidal positions follow PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...)") {
  PositionalEncoding pe(parla::PositionEncoding::kSinusoidal, 0, 6);
  auto t = pe->forward(4, 3, torch::kFloat);  // positions 3..6
  for (int p = 0; p < 4; ++p)
    for (int i = 0; i < 3; ++i) {
      double angle = (p + 3) / std::pow(10000.0, 2.0 * i / 6.0);
      CHECK(t[p][2 * i].item<double>() == Approx(std::sin(angle)).margin(1e-6));
      CHECK(t[p][2 * i + 1].item<double>() == Approx(std::cos(angle)).margin(1e-6));
    }
  CHECK(pe->max_positions() == INT64_MAX);
  CHECK(pe->forward(2, 5000, torch::kFloat).size(0) == 2);  // unlimited: grows on demand
}

TEST_CASE("concatenated sinusoidal positions put the d/2 sines first, then the cosines of the same frequencies, "
          "for even and odd d") {
  for (int d : {6, 7}) {
    INFO("d = " << d);
    PositionalEncoding pe(parla::PositionEncoding::kSinusoidal, 0, d, parla::SinusoidalLayout::kConcatenated);
    auto t = pe->forward(4, 3, torch::kFloat);  // positions 3..6
    const int sines = (d + 1) / 2, cosines = d / 2;
    for (int p = 0; p < 4; ++p) {
      for (int i = 0; i < sines; ++i)
        CHECK(t[p][i].item<double>() == Approx(std::sin((p + 3) / std::pow(10000.0, 2.0 * i / d))).margin(1e-6));
      for (int i = 0; i < cosines; ++i)
        CHECK(t[p][sines + i].item<double>() ==
              Approx(std::cos((p + 3) / std::pow(10000.0, 2.0 * i / d))).margin(1e-6));
    }
  }
}

TEST_CASE("fairseq's sinusoidal positions (M2M-100, NLLB): frequencies 10000^(-i/(d/2-1)), sines then cosines, "
          "positions counted from padding_idx + 1 = 2, a zero column for odd d") {
  for (int d : {8, 9}) {
    INFO("d = " << d);
    PositionalEncoding pe(parla::PositionEncoding::kSinusoidal, 0, d, parla::SinusoidalLayout::kFairseq);
    auto t = pe->forward(4, 3, torch::kFloat);  // the 4th..7th tokens: fairseq positions 5..8
    const int half = d / 2;
    for (int p = 0; p < 4; ++p) {
      const double position = p + 3 + 2;
      for (int i = 0; i < half; ++i) {
        const double angle = position * std::exp(-i * std::log(10000.0) / (half - 1));
        CHECK(t[p][i].item<double>() == Approx(std::sin(angle)).margin(1e-6));
        CHECK(t[p][half + i].item<double>() == Approx(std::cos(angle)).margin(1e-6));
      }
      if (d % 2) CHECK(t[p][d - 1].item<double>() == 0.0);
    }
  }
}

TEST_CASE("sinusoidal positions come in the dtype asked for, with the float table's values, and are never saved") {
  PositionalEncoding pe(parla::PositionEncoding::kSinusoidal, 0, 6);
  auto f = pe->forward(5, 2, torch::kFloat);
  auto d = pe->forward(5, 2, torch::kDouble);
  CHECK(f.scalar_type() == torch::kFloat);
  CHECK(d.scalar_type() == torch::kDouble);
  CHECK(d.device().is_cpu());
  // Reference: the free function's table (rows 2..6), rounded to float once.
  CHECK(torch::equal(f, sinusoidal_table(5, 6, 2)));
  CHECK(torch::equal(d, sinusoidal_table(5, 6, 2).to(torch::kDouble)));
  CHECK(pe->forward(5, 2, torch::kFloat).scalar_type() == torch::kFloat);  // the cache follows the request back
  // No buffer and no parameter: checkpoints written before positions followed the device have no such entry.
  CHECK(pe->buffers().empty());
  CHECK(pe->parameters().empty());
}

TEST_CASE("sinusoidal positions asked for by several threads at once (parla-translate's workers) are the table's") {
  // Each thread asks for ever longer spans, in both dtypes, so the shared cache is regrown and replaced while
  // the others read it; every answer must still equal the free function's rows.
  std::atomic<int> wrong{0};
  for (int rep = 0; rep < 8; ++rep) {  // a fresh cache each time: the race is at its growth
    PositionalEncoding pe(parla::PositionEncoding::kSinusoidal, 0, 8);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        torch::NoGradGuard no_grad;
        for (int64_t length = 1; length <= 700; length += 3 + t) {
          const auto dtype = (length + t) % 2 ? torch::kFloat : torch::kDouble;
          auto got = pe->forward(length, t, dtype);
          if (!torch::equal(got, sinusoidal_table(length, 8, t).to(dtype))) ++wrong;
        }
      });
    }
    for (auto& th : threads) th.join();
  }
  CHECK(wrong == 0);
}

TEST_CASE("sinusoidal positions on a GPU equal the CPU's exactly", "[cuda]") {
  PARLA_REQUIRE_CUDA();
  PositionalEncoding pe(parla::PositionEncoding::kSinusoidal, 0, 8);
  auto gpu = pe->forward(7, 300, torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat));
  CHECK(gpu.device().is_cuda());
  CHECK(torch::equal(gpu.cpu(), pe->forward(7, 300, torch::kFloat)));
}

TEST_CASE("learned positions reject sequences longer than max_positions with a DataError") {
  PositionalEncoding pe(parla::PositionEncoding::kLearned, 8, 4);
  CHECK(pe->forward(8, 0, torch::kFloat).sizes() == torch::IntArrayRef({8, 4}));
  CHECK_THROWS_AS(pe->forward(3, 6, torch::kFloat), parla::DataError);
}

TEST_CASE("feed-forward computes act(x W1 + b1) W2 + b2 for relu, gelu and swish") {
  torch::manual_seed(1);
  for (std::string act : {"relu", "gelu", "swish"}) {
    INFO(act);
    FeedForward ffn(4, 6, parla::testing::choice<parla::Activation>(act), 0.0);
    ffn->to(torch::kDouble);
    auto x = torch::randn({2, 4}, torch::kDouble);
    auto out = ffn->forward(x);
    auto w1 = ffn->fc1->weight, b1 = ffn->fc1->bias, w2 = ffn->fc2->weight, b2 = ffn->fc2->bias;
    for (int r = 0; r < 2; ++r)
      for (int o = 0; o < 4; ++o) {
        double s = b2[o].item<double>();
        for (int h = 0; h < 6; ++h) {
          double a = b1[h].item<double>();
          for (int c = 0; c < 4; ++c) a += w1[h][c].item<double>() * x[r][c].item<double>();
          a = act == "relu"   ? std::max(a, 0.0)
              : act == "gelu" ? 0.5 * a * (1 + std::erf(a / std::sqrt(2.0)))
                              : a / (1 + std::exp(-a));  // swish: x sigmoid(x)
          s += w2[o][h].item<double>() * a;
        }
        CHECK(out[r][o].item<double>() == Approx(s).margin(1e-10));
      }
  }
}

TEST_CASE("an embedding lookup on the CPU gives the bits of the gather-and-scale ops it skips (float and int8 "
          "tables, scaled or not), and keeps its gradient in training") {
  torch::manual_seed(12);
  for (bool scaled : {true, false}) {
    Embedding e(40, 24, scaled, 0);
    const float scale = scaled ? static_cast<float>(std::sqrt(24.0)) : 1.0f;
    auto ids = torch::tensor({{5, 0, 39}, {17, 17, 2}}, torch::kLong);  // [2, 3]: any shape
    torch::Tensor out;
    {
      torch::NoGradGuard no_grad;
      out = e->forward(ids);
    }
    REQUIRE(out.sizes() == torch::IntArrayRef({2, 3, 24}));
    auto reference = torch::embedding(e->weight.detach(), ids);
    if (scaled) reference = reference * scale;
    CHECK(torch::equal(out, reference));

    auto m = parla::nn::Int8Matrix::quantize(e->weight.detach());
    auto int8_reference = m.codes().index_select(0, ids.reshape({-1})).to(torch::kFloat) *
                          m.scales.index_select(0, ids.reshape({-1})).unsqueeze(1);
    if (scaled) int8_reference = int8_reference * scale;
    Embedding q(40, 24, scaled, 0);
    q->use_int8(m);
    torch::NoGradGuard no_grad;
    CHECK(torch::equal(q->forward(ids), int8_reference.view({2, 3, 24})));
    CHECK_THROWS_AS(q->forward(torch::tensor({40}, torch::kLong)), parla::DataError);
  }
  Embedding trained(10, 8, true, 0);
  trained->forward(torch::tensor({3, 3}, torch::kLong)).sum().backward();
  REQUIRE(trained->weight.grad().defined());
  CHECK(trained->weight.grad()[3].eq(2 * std::sqrt(8.0f)).all().item<bool>());
}

TEST_CASE("embeddings are scaled by sqrt(d), have a zero padding row and reject out-of-range ids") {
  Embedding e(10, 16, true, 0);
  auto ids = torch::tensor({0, 3, 9}, torch::kLong);
  auto out = e->forward(ids);
  CHECK(out[0].eq(0).all().item<bool>());
  CHECK((out[1] - e->weight[3] * 4.0).abs().max().item<double>() < 1e-6);
  CHECK_THROWS_AS(e->forward(torch::tensor({10}, torch::kLong)), parla::DataError);
  CHECK_THROWS_AS(e->forward(torch::tensor({-1}, torch::kLong)), parla::DataError);
  // normal(0, d^-0.5): the standard deviation of a large table is close to 0.25 for d = 16.
  Embedding big(4000, 16, false, -1);
  CHECK(big->weight.std().item<double>() == Approx(0.25).epsilon(0.05));
}

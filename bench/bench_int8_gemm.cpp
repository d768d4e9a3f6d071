// The int8 product (nn::int8_linear: quantize the rows, the u8 x s8 -> s32 product, scale back) against the fp32
// product LibTorch runs (torch::linear over the system BLAS), on the decoder's shapes, in the same process. The
// int8 product is parla's panel kernel up to 32 rows (64 for small weights) on AVX-512 VNNI
// (kernels/int8_vnni_rows.h), oneDNN's otherwise; panels=off (runtime.int8_panels false) runs oneDNN's at every row
// count, to compare (alternate the two runs).
//
// Shapes: rows m = 5 (one sentence, beam 5) and 320 (64 sentences, beam 5) times the projections of the small
// Multi30k model (d 256, ffn 1024, vocabulary 8,000) and of a base model (d 512, ffn 2048, vocabulary 32,000).
// Reports the median time of each product over `iterations` calls after a warm-up, GFLOP/s (2mnk / time; for int8
// "GOP/s") and the int8 speed-up.
// Usage: bench_int8_gemm [iterations=50] [only=SHAPE-NAME-PART] [rows=5,320] [panels=on|off]
#include <cstdio>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "median_time.h"
#include "runtime/runtime.h"
#include "kernels/int8_gemm.h"
#include "kernels/int8_vnni_rows.h"
#include "nn/int8_matrix.h"

int main(int argc, char** argv) {
  parla::runtime::tune_process(argc, argv);
  parla::RuntimeConfig rc;
  rc.int8_panels = !(argc > 4 && std::string(argv[4]) == "off");
  const int threads = parla::runtime::apply(rc);
  const int iterations = argc > 1 ? std::stoi(argv[1]) : 50;
  const std::string only = argc > 2 ? argv[2] : "";
  const std::vector<int64_t> row_counts = parla::bench::parse_counts(argc > 3 ? argv[3] : "5,320");
  torch::NoGradGuard no_grad;
  const auto& code = parla::kernels::int8::activation_code();
  std::printf("threads %d, oneDNN isa %s, activations [-%d, %d] + %d, panel kernel %s\n", threads, code.isa.c_str(),
              code.levels, code.levels, code.offset,
              parla::kernels::int8::vnni_rows_available() ? (rc.int8_panels ? "available" : "available, off (panels=off)") : "not available");
  struct Shape { const char* name; int64_t n, k; };
  const std::vector<Shape> shapes = {{"d256 qkv", 768, 256},   {"d256 ffn1", 1024, 256}, {"d256 ffn2", 256, 1024},
                                     {"d256 out8k", 8000, 256}, {"d512 qkv", 1536, 512}, {"d512 ffn1", 2048, 512},
                                     {"d512 ffn2", 512, 2048},  {"d512 out32k", 32000, 512}};
  std::printf("| shape | m | n | k | fp32 us | fp32 GFLOP/s | int8 us | int8 GOP/s | speed-up |\n|---|---|---|---|---|---|---|---|---|\n");
  for (int64_t m : row_counts) {
    for (const auto& s : shapes) {
      if (std::string(s.name).find(only) == std::string::npos) continue;
      auto w = torch::randn({s.n, s.k}) * 0.05, b = torch::randn({s.n}) * 0.1, x = torch::randn({m, s.k});
      auto q = parla::nn::Int8Matrix::quantize(w);
      const double t32 = parla::bench::median_seconds(iterations, [&] { torch::linear(x, w, b); });
      const double t8 = parla::bench::median_seconds(iterations, [&] { parla::nn::int8_linear(x, q, b); });
      const double ops = 2.0 * m * s.n * s.k;
      std::printf("| %s | %ld | %ld | %ld | %.1f | %.1f | %.1f | %.1f | %.2fx |\n", s.name, m, s.n, s.k, t32 * 1e6,
                  ops / t32 / 1e9, t8 * 1e6, ops / t8 / 1e9, t32 / t8);
    }
  }
  return 0;
}

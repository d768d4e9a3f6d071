// The packed fp32 product (nn::packed_linear over kernels/fp32_gemm: the weight laid out once) against the one
// LibTorch runs (torch::linear over the system BLAS, which repacks the weight on every call), on the decoder's
// shapes, in the same process, and whether they agree within the float rounding of a k-long sum.
//
// Shapes as bench_int8_gemm: rows m = 5 (one sentence, beam 5) and 320 (64 sentences, beam 5) times the projections
// of the small Multi30k model (d 256) and of a base model (d 512). Median of `iterations` calls after a warm-up.
// Usage: bench_fp32_gemm [iterations=50] [only=SHAPE-NAME-PART] [rows=5,320] [threads=1]
#include <cstdio>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "kernels/fp32_gemm.h"
#include "nn/packed_matrix.h"
#include "median_time.h"
#include "runtime/runtime.h"

int main(int argc, char** argv) {
  parla::runtime::tune_process(argc, argv);
  parla::RuntimeConfig rc;
  rc.threads = argc > 4 ? std::stoi(argv[4]) : 1;
  const int threads = parla::runtime::apply(rc);
  const int iterations = argc > 1 ? std::stoi(argv[1]) : 50;
  const std::string only = argc > 2 ? argv[2] : "";
  const std::vector<int64_t> row_counts = parla::bench::parse_counts(argc > 3 ? argv[3] : "5,320");
  torch::NoGradGuard no_grad;
  std::printf("threads %d, packed product on %s, BLAS %s\n", threads,
              parla::kernels::fp32::isa_name(parla::kernels::fp32::best_isa()), parla::runtime::blas_name().c_str());
  struct Shape { const char* name; int64_t n, k; };
  const std::vector<Shape> shapes = {{"d256 qkv", 768, 256},   {"d256 ffn1", 1024, 256}, {"d256 ffn2", 256, 1024},
                                     {"d256 out8k", 8000, 256}, {"d512 qkv", 1536, 512}, {"d512 ffn1", 2048, 512},
                                     {"d512 ffn2", 512, 2048},  {"d512 out32k", 32000, 512}};
  std::printf("| shape | m | n | k | LibTorch us | packed us | speed-up | max abs difference |\n"
              "|---|---|---|---|---|---|---|---|\n");
  for (int64_t m : row_counts) {
    for (const auto& s : shapes) {
      if (std::string(s.name).find(only) == std::string::npos) continue;
      auto w = torch::randn({s.n, s.k}) * 0.05, b = torch::randn({s.n}) * 0.1, x = torch::randn({m, s.k});
      auto packed = parla::nn::PackedMatrix::pack(w);
      const double blas = parla::bench::median_seconds(iterations, [&] { torch::linear(x, w, b); });
      const double ours = parla::bench::median_seconds(iterations, [&] { parla::nn::packed_linear(x, packed, b); });
      const double diff = (parla::nn::packed_linear(x, packed, b) - torch::linear(x, w, b)).abs().max().item<double>();
      std::printf("| %s | %ld | %ld | %ld | %.1f | %.1f | %.2fx | %.1e |\n", s.name, m, s.n, s.k, blas * 1e6,
                  ours * 1e6, blas / ours, diff);
    }
  }
  return 0;
}

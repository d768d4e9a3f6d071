#include "nn/word_dropout.h"

#include <c10/util/Exception.h>

namespace parla::nn {

torch::Tensor word_dropout(const torch::Tensor& embeddings, double p, bool training) {
  TORCH_CHECK(p >= 0 && p < 1, "word dropout probability must be in [0, 1), got ", p);
  if (!training || p == 0) return embeddings;
  TORCH_CHECK(embeddings.dim() >= 2, "word dropout needs [..., T, E] embeddings");
  auto shape = embeddings.sizes().vec();
  shape.back() = 1;  // one draw per token, shared by its coordinates
  // Drawn in fp32 so that a bf16 run keeps the same keep/drop pattern (and scale) as an fp32 one.
  auto keep = torch::empty(shape, embeddings.options().dtype(torch::kFloat)).bernoulli_(1 - p).div_(1 - p);
  return embeddings * keep.to(embeddings.dtype());
}

}  // namespace parla::nn

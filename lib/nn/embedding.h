#pragma once
// Token embeddings. Initialised normal(0, dim^-0.5) with the padding row zero (as fairseq), and multiplied by
// sqrt(dim) in the Transformer (Vaswani et al. 2017, Sec. 3.4) so that they start at unit scale next to the
// positional encodings. The same weight can serve as the output projection (weight tying, Press & Wolf 2017).
#include <torch/nn/module.h>
#include <torch/types.h>

#include <memory>

#include "nn/int8_matrix.h"
#include "nn/packed_matrix.h"

namespace parla::nn {

class EmbeddingImpl : public torch::nn::Module {
 public:
  EmbeddingImpl(int64_t vocab_size, int64_t dim, bool scale, int64_t pad_id = 0);
  // ids int64 [...] -> [..., dim]. Throws DataError on an id outside [0, vocab_size).
  torch::Tensor forward(const torch::Tensor& ids);
  int64_t vocab_size() const { return weight.size(0); }
  int64_t dim() const { return weight.size(1); }

  // h [..., dim] -> [..., vocab_size] = h weight^T (+ bias [vocab_size] when given): the table as a tied output
  // projection. The packed product adds the bias as it writes its output, the others in place (the same sums).
  // The packed and int8 products write into *storage when given (nn/reused_output.h).
  torch::Tensor project(const torch::Tensor& h, const torch::Tensor& bias = {}, torch::Tensor* storage = nullptr);

  // Replaces the float table by `m` (its memory is released; the shape stays). Inference only.
  void use_int8(Int8Matrix m);
  const Int8Matrix* int8() const { return int8_.get(); }
  // project() computes with `m`, the table packed (nn/packed_matrix.h), and lookups read their rows out of it: the
  // float table is released (inference on the CPU only; its shape stays).
  void use_packed_projection(PackedMatrix m);
  const PackedMatrix* packed_projection() const { return packed_.get(); }

  torch::Tensor weight;  // [vocab_size, dim]

 private:
  double scale_;
  std::shared_ptr<const Int8Matrix> int8_;
  std::shared_ptr<const PackedMatrix> packed_;
};
TORCH_MODULE(Embedding);

}  // namespace parla::nn

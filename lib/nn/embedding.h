#pragma once
// Token embeddings. Initialised normal(0, dim^-0.5) with the padding row zero (as fairseq), and multiplied by
// sqrt(dim) in the Transformer (Vaswani et al. 2017, Sec. 3.4) so that they start at unit scale next to the
// positional encodings. The same weight can serve as the output projection (weight tying, Press & Wolf 2017).
#include <torch/nn/module.h>
#include <torch/types.h>

namespace parla::nn {

class EmbeddingImpl : public torch::nn::Module {
 public:
  EmbeddingImpl(int64_t vocab_size, int64_t dim, bool scale, int64_t pad_id = 0);
  // ids int64 [...] -> [..., dim]. Throws DataError on an id outside [0, vocab_size).
  torch::Tensor forward(const torch::Tensor& ids);
  int64_t vocab_size() const { return weight.size(0); }
  int64_t dim() const { return weight.size(1); }

  torch::Tensor weight;  // [vocab_size, dim]

 private:
  double scale_;
};
TORCH_MODULE(Embedding);

}  // namespace parla::nn

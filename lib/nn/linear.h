#pragma once
// A fully connected layer, y = x W^T + b, that can switch to int8 for decoding (nn/int8_matrix.h). Parameter
// names and initialisation are LibTorch's torch::nn::Linear (kaiming-uniform weight, uniform bias, the same random
// numbers in the same order), so checkpoints and seeded runs are unchanged. It is its own module rather than a
// subclass because LibTorch's constructor initialises the weight unconditionally; under nn::SkipInitialization this
// one only allocates it (loading a checkpoint overwrites it anyway).
#include <memory>

#include <torch/nn/cloneable.h>
#include <torch/nn/options/linear.h>
#include <torch/types.h>

#include "nn/int8_matrix.h"
#include "nn/packed_matrix.h"

namespace parla::nn {

class LinearImpl : public torch::nn::Cloneable<LinearImpl> {
 public:
  LinearImpl(int64_t in_features, int64_t out_features) : LinearImpl(torch::nn::LinearOptions(in_features, out_features)) {}
  explicit LinearImpl(const torch::nn::LinearOptions& options);

  void reset() override;
  void reset_parameters();
  void pretty_print(std::ostream& stream) const override;
  torch::Tensor forward(const torch::Tensor& x);

  // Replaces the float weight by `m` (the float tensor's memory is released; its shape stays). Inference only.
  void use_int8(Int8Matrix m);
  const Int8Matrix* int8() const { return int8_.get(); }
  // Replaces the float weight by its packed copy (nn/packed_matrix.h; the float memory is released). Inference
  // on the CPU in fp32 only.
  void use_packed(PackedMatrix m);
  const PackedMatrix* packed() const { return packed_.get(); }

  torch::nn::LinearOptions options;
  torch::Tensor weight;
  torch::Tensor bias;  // undefined when options.bias() is false

 private:
  std::shared_ptr<const Int8Matrix> int8_;
  std::shared_ptr<const PackedMatrix> packed_;
};
TORCH_MODULE(Linear);

}  // namespace parla::nn

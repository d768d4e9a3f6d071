#pragma once
// A fully connected layer, y = x W^T + b, that can switch to int8 for decoding (nn/int8_matrix.h). Parameter
// names and initialisation are LibTorch's torch::nn::Linear, so checkpoints are unchanged.
#include <memory>

#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include "nn/int8_matrix.h"
#include "nn/packed_matrix.h"

namespace parla::nn {

class LinearImpl : public torch::nn::LinearImpl {
 public:
  using torch::nn::LinearImpl::LinearImpl;
  torch::Tensor forward(const torch::Tensor& x);

  // Replaces the float weight by `m` (the float tensor's memory is released; its shape stays). Inference only.
  void use_int8(Int8Matrix m);
  const Int8Matrix* int8() const { return int8_.get(); }
  // Replaces the float weight by its packed copy (nn/packed_matrix.h; the float memory is released). Inference
  // on the CPU in fp32 only.
  void use_packed(PackedMatrix m);
  const PackedMatrix* packed() const { return packed_.get(); }

 private:
  std::shared_ptr<const Int8Matrix> int8_;
  std::shared_ptr<const PackedMatrix> packed_;
};
TORCH_MODULE(Linear);

}  // namespace parla::nn

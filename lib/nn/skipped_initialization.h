#pragma once
// Building a model only to overwrite its weights from a checkpoint: while a SkipInitialization lives on this thread,
// modules that support it allocate their large parameters without writing them (torch::empty), so that pages
// nobody writes never count in the process's memory, and no time goes into random numbers. Only for callers that
// then overwrite every parameter or fail (models::load_seq2seq: each parameter is read from the checkpoint, or
// replaced by its int8 matrix, and a missing one is an error). Honoured by every module that initialises a
// parameter: nn::Linear (LibTorch's initialisation otherwise), the modules that re-initialise their layers (xavier,
// zeros), and the N(0, 1/d) tables below (embeddings, learned positions, an untied output projection).
#include <cstdint>

#include <torch/types.h>

namespace parla::nn {

class SkipInitialization {
 public:
  SkipInitialization();
  ~SkipInitialization();
  SkipInitialization(const SkipInitialization&) = delete;
  SkipInitialization& operator=(const SkipInitialization&) = delete;

 private:
  bool previous_;
};

bool initialization_skipped();

// A [rows, dim] table drawn from N(0, 1/dim), scaled in place (a second table, the product's, doubled the peak
// memory of building a model); under SkipInitialization allocated and not written.
torch::Tensor initial_normal_table(int64_t rows, int64_t dim);

}  // namespace parla::nn

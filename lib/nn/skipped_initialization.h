#pragma once
// Building a model only to overwrite its weights from a checkpoint: while a SkipInitialization lives on this thread,
// modules that support it allocate their large parameters without writing them (torch::empty), so that pages
// nobody writes never count in the process's memory, and no time goes into random numbers. Only for callers that
// then overwrite every parameter or fail (models::load_seq2seq: each parameter is read from the checkpoint, or
// replaced by its int8 matrix, and a missing one is an error). Supported by: nn::Embedding (the largest table:
// 58,101 x 512 floats in an OPUS-MT model).
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

}  // namespace parla::nn

#pragma once
// What the checkpoint tests save and compare: a model's metadata (with a binary SentencePiece blob that has NUL
// and 0xFF bytes in it), and a model's outputs on a fixed batch.
#include <string>

#include <torch/torch.h>

#include "core/config.h"
#include "models/checkpoint.h"
#include "support/seq2seq.h"

namespace parla::testing {

inline models::ModelMeta meta_for(const ModelConfig& model_cfg) {
  models::ModelMeta m = meta_of(model_cfg);
  m.src_spm = std::string("\x0a\x00\xff binary proto", 16);
  m.tgt_spm = "";
  m.info = {{"step", 42}};
  return m;
}

inline torch::Tensor outputs(models::Seq2SeqModel& model) {
  torch::NoGradGuard g;
  model.eval();
  auto src = torch::tensor({5, 9, 7, 3, 6, 8, 3, 0}, torch::kLong).view({2, 4});
  auto tgt = torch::tensor({2, 5, 6, 2, 7, 8}, torch::kLong).view({2, 3});
  return model.forward(src, tgt);
}

}  // namespace parla::testing

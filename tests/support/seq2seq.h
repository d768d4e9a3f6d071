#pragma once
// Small helpers for tests of saved and quantized sequence-to-sequence models.
#include <torch/torch.h>

#include "core/config.h"
#include "models/checkpoint.h"
#include "models/seq2seq.h"

namespace parla::testing {

// The metadata of a checkpoint whose config is the defaults with `model_cfg` as its model section.
inline models::ModelMeta meta_of(const ModelConfig& model_cfg) {
  Config c;
  c.model = model_cfg;
  models::ModelMeta m;
  m.config = config::to_json(c);
  return m;
}

// log_softmax of the model's logits for (src, tgt_in), in eval mode and without gradients.
inline torch::Tensor log_probs(models::Seq2SeqModel& model, const torch::Tensor& src, const torch::Tensor& tgt_in) {
  torch::NoGradGuard g;
  model.eval();
  return torch::log_softmax(model.forward(src, tgt_in), -1);
}

}  // namespace parla::testing

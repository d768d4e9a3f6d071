#pragma once
// Tiny model configs for fast tests (d_model 16).
#include "core/config/model_config.h"

namespace parla::testing {

inline ModelConfig tiny_transformer() {
  ModelConfig c;
  c.type = parla::ModelType::kTransformer;
  c.d_model = 16;
  c.ffn_dim = 32;
  c.heads = 4;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.max_positions = 64;
  return c;
}

inline ModelConfig tiny_rnn() {
  ModelConfig c;
  c.type = parla::ModelType::kRnn;
  c.embed_dim = 12;
  c.rnn_hidden = 12;
  c.rnn_layers = 2;
  return c;
}

}  // namespace parla::testing

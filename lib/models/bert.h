#pragma once
// BERT (Devlin et al. 2019): a Transformer encoder over the sum of token, segment and learned position
// embeddings (followed by layer norm and dropout), with two pre-training heads:
//   masked LM      dense + GELU + layer norm, then the output projection tied to the token embeddings (+ bias)
//   next sentence  pooler tanh(W h_[first]) on the first token, then a 2-way classifier
// Uses the model section's d_model, ffn_dim, heads, encoder_layers, dropouts, activation, norm,
// max_positions and segments.
#include <memory>

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/types.h>

#include "core/config/model_config.h"
#include "models/bert_masking.h"  // the masked-LM data utility goes with the model
#include "models/seq2seq.h"
#include "models/transformer_encoder.h"
#include "nn/embedding.h"
#include "nn/positional_encoding.h"

namespace parla::models {

struct BertOutput {
  torch::Tensor mlm_logits;  // [B, T, V], or [P, V] for the P positions asked for
  torch::Tensor nsp_logits;  // [B, 2]
};

class BertModel : public torch::nn::Module {
 public:
  BertModel(const ModelConfig& cfg, int64_t vocab);
  // tokens int64 [B, T] (kPadId padding); segments int64 [B, T] in [0, model.segments) or undefined (all 0).
  // mlm_positions int64 [P]: flat indices (b * T + t) where the masked-LM head is wanted; undefined = all. The
  // vocabulary projection dominates the cost and only ~15% of the positions are predicted in pretraining.
  BertOutput forward(const torch::Tensor& tokens, const torch::Tensor& segments = {},
                     const torch::Tensor& mlm_positions = {});
  // The encoder output [B, T, D].
  torch::Tensor encode(const torch::Tensor& tokens, const torch::Tensor& segments = {});
  int64_t vocab_size() const { return vocab_; }
  const ModelConfig& config() const { return cfg_; }

  nn::Embedding token_embed{nullptr}, segment_embed{nullptr};
  nn::PositionalEncoding positions{nullptr};
  torch::nn::LayerNorm embed_norm{nullptr};
  TransformerEncoder encoder{nullptr};
  torch::nn::Linear mlm_dense{nullptr};
  torch::nn::LayerNorm mlm_norm{nullptr};
  torch::Tensor mlm_bias;  // [V]
  torch::nn::Linear pooler{nullptr}, nsp{nullptr};

 private:
  ModelConfig cfg_;
  int64_t vocab_;
};

// Initialises a Transformer translation model's encoder from a pre-trained BERT. Copies every encoder layer
// (self-attention, feed-forward, layer norms, and the final norm of pre-norm models), the token embedding
// table into the source embedding when the shapes match (with share_embeddings this is also the target
// embedding), and the position table when both use learned positions of the same shape. Not copied: BERT's
// segment embeddings, embedding layer norm and heads. Throws ConfigError when `model` is not a Transformer or
// its encoder has a different shape (d_model, ffn_dim, heads, encoder_layers, norm).
void init_encoder_from_bert(Seq2SeqModel& model, const BertModel& bert);

}  // namespace parla::models

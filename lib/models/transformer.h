#pragma once
// The Transformer translation model (Vaswani et al. 2017): scaled token embeddings plus sinusoidal or learned
// positions, encoder and decoder stacks, output projection (optionally tied to the decoder embedding, and one
// embedding table for both sides when the vocabulary is joint).
//
// Initialisation (as fairseq): Xavier uniform for every projection, normal(0, d^-0.5) for embeddings (pad row
// zero), layer norms at (1, 0), biases zero; an untied output projection is normal(0, d^-0.5).
#include <memory>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "core/config/model_config.h"
#include "models/output_shortlist.h"
#include "models/seq2seq.h"
#include "models/transformer_decoder.h"
#include "models/transformer_encoder.h"
#include "nn/embedding.h"
#include "nn/positional_encoding.h"

namespace parla::models {

// Incremental decoding state: source padding mask, per-layer caches, steps taken.
class TransformerState : public DecoderState {
 public:
  void reorder(const torch::Tensor& indices) override;
  void reorder_beams(const torch::Tensor& rows, const torch::Tensor& sentences, int64_t beam) override;
  bool append(DecoderState& other) override;
  int64_t steps() const override { return steps_; }
  void expect_steps(int64_t more) override;

  torch::Tensor memory_valid;  // bool [M, S]: the source mask of each row of the cross keys/values (cache)
  TransformerDecoderCache cache;
  int64_t steps_ = 0;
  int64_t beam = 1;  // consecutive hypothesis rows sharing one row of memory_valid and of the cross K/V
  // int64 [N]: the step at which each row joined (continuous batching); undefined while all rows started at 0.
  // A row's target position is steps_ - row_start.
  torch::Tensor row_start;
  // The output projection cut to shortlist->columns (made at the first step after the columns change): at most one
  // of weight [U, D], int8 and packed is set, as for the whole projection.
  struct ShortlistProjection {
    const OutputShortlist* shortlist = nullptr;
    uint64_t version = 0;
    torch::Tensor weight, bias;
    std::shared_ptr<const nn::Int8Matrix> int8;
    std::shared_ptr<const nn::PackedMatrix> packed;
  } shortlist_projection;
  // step_logits' output on the CPU, kept from step to step (its [N, V] view is what a step returns;
  // nn/reused_output.h says why).
  torch::Tensor logits_buffer;

 private:
  // Renumbers the steps once every row joined at step `min_start` or later (nothing reads older positions).
  void rebase();
  // Keeps the memory of sentences `sentences` (int64 [N / beam]), in that order.
  void select_sentences(const torch::Tensor& sentences);
};

class TransformerModel : public Seq2SeqModel {
 public:
  // Throws ConfigError naming the key for impossible settings (share_embeddings with different vocab sizes).
  TransformerModel(const ModelConfig& cfg, int64_t src_vocab, int64_t tgt_vocab);

  std::unique_ptr<DecoderState> start(const torch::Tensor& src) override;
  torch::Tensor step(const torch::Tensor& prev, DecoderState& state, torch::Tensor* attention = nullptr) override;
  bool has_step_logits(const DecoderState& state) const override;
  torch::Tensor step_logits(const torch::Tensor& prev, DecoderState& state) override;
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt_in) override;
  int64_t vocab_size() const override { return tgt_vocab_; }
  int64_t source_vocab_size() const override { return src_vocab_; }
  int64_t max_positions() const override;
  int64_t start_id() const override {
    return cfg_.decoder_start == DecoderStart::kPad ? kPadId : cfg_.decoder_start == DecoderStart::kEos ? kEosId : kBosId;
  }
  bool supports_shortlist() const override { return true; }

  // Encoder output [B, S, D] of src [B, S].
  torch::Tensor encode(const torch::Tensor& src);
  // Decoder hidden states [B, T, D] -> logits [B, T, V]; the packed and int8 products write into *storage when given
  // (nn/reused_output.h).
  torch::Tensor output_logits(const torch::Tensor& hidden, torch::Tensor* storage = nullptr);
  // Hidden states [N, D] -> logits [N, U] over state.shortlist's columns (the projection cut to them, cached).
  torch::Tensor shortlist_logits(const torch::Tensor& hidden, TransformerState& state);
  const ModelConfig& config() const { return cfg_; }

  nn::Embedding src_embed{nullptr}, tgt_embed{nullptr};  // the same module when share_embeddings
  nn::PositionalEncoding src_positions{nullptr}, tgt_positions{nullptr};
  TransformerEncoder encoder{nullptr};
  TransformerDecoder decoder{nullptr};
  torch::Tensor output_weight;  // [V, D]; undefined when tied to tgt_embed
  torch::Tensor output_bias;    // [V] (model.output_bias); undefined without
  // output_weight in int8 (models/int8_quantization.h); null unless quantized, and always when tied.
  std::shared_ptr<const nn::Int8Matrix> output_int8;
  // output_weight packed for fp32 decoding (models/packed_fp32.h); null unless packed, and always when tied.
  std::shared_ptr<const nn::PackedMatrix> output_packed;

 private:
  // Token embeddings (with word dropout `word_dropout` in training) + positions, then embedding dropout.
  torch::Tensor embed(nn::Embedding& table, nn::PositionalEncoding& positions, const torch::Tensor& ids,
                      int64_t offset, double word_dropout = 0.0);
  // A step's decoder output [N, D] (the state advanced), what step() and step_logits() project.
  torch::Tensor decoder_output(const torch::Tensor& prev, TransformerState& state, torch::Tensor* attention);
  ModelConfig cfg_;
  int64_t src_vocab_, tgt_vocab_;
};

}  // namespace parla::models

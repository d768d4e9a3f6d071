#pragma once
// The attentional RNN encoder-decoder:
//   encoder  bidirectional GRU/LSTM over the source (Bahdanau et al. 2015, Sec. 3.2); annotations h_j are the
//            concatenated forward and backward states [B, S, 2H]; the decoder's initial state per layer is
//            tanh(W [last forward; last backward]) (LSTM cells start at zero).
//   decoder  GRU/LSTM with attention over the annotations:
//            bahdanau  c_t from the additive score on the previous state s_{t-1} (their Eq. 5-6); the context
//                      is part of the RNN input; attentional vector h~_t = tanh(W_c [s_t; c_t])
//            luong     c_t from the general score s_t^T W h_j on the current state (Luong et al. 2015, Eq. 5,
//                      8); h~_t = tanh(W_c [c_t; s_t])
//            input feeding (Luong et al. 2015, Sec. 3.3) appends h~_{t-1} to the next RNN input.
//   output   softmax(W_out h~_t); W_out tied to the target embedding when model.tie_output (needs
//            embed_dim == rnn_hidden).
// Training and step-wise decoding share one step function, so both compute the same thing.
#include <memory>

#include <torch/nn/module.h>
#include <torch/nn/modules/rnn.h>
#include <torch/types.h>

#include "core/config/model_config.h"
#include "models/seq2seq.h"
#include "nn/attention_scores.h"
#include "nn/embedding.h"
#include "nn/linear.h"

namespace parla::models {

class RnnState : public DecoderState {
 public:
  void reorder(const torch::Tensor& indices) override;
  void reorder_beams(const torch::Tensor& rows, const torch::Tensor& sentences, int64_t beam) override;
  bool append(DecoderState& other) override;
  int64_t steps() const override { return steps_; }

  torch::Tensor h, c;          // [L, N, H] (c: LSTM only)
  torch::Tensor feed;          // h~_{t-1} [N, H]
  torch::Tensor annotations;   // [N / beam, S, 2H]
  torch::Tensor keys;          // annotations after the score's key projection
  torch::Tensor valid;         // bool [N / beam, S]
  int64_t steps_ = 0;
  int64_t beam = 1;  // consecutive hypothesis rows sharing one row of annotations, keys and valid
};

class RnnModel : public Seq2SeqModel {
 public:
  RnnModel(const ModelConfig& cfg, int64_t src_vocab, int64_t tgt_vocab);

  std::unique_ptr<DecoderState> start(const torch::Tensor& src) override;
  torch::Tensor step(const torch::Tensor& prev, DecoderState& state, torch::Tensor* attention = nullptr) override;
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt_in) override;
  int64_t vocab_size() const override { return tgt_vocab_; }
  int64_t source_vocab_size() const override { return src_vocab_; }
  int64_t max_positions() const override;
  bool supports_shortlist() const override { return true; }

  // Runs the encoder and sets up a decoder state for src [B, S].
  std::unique_ptr<RnnState> encode(const torch::Tensor& src);

  nn::Embedding src_embed{nullptr}, tgt_embed{nullptr};
  torch::nn::GRU enc_gru{nullptr}, dec_gru{nullptr};
  torch::nn::LSTM enc_lstm{nullptr}, dec_lstm{nullptr};
  nn::Linear bridge{nullptr}, combine{nullptr}, output{nullptr};
  std::shared_ptr<nn::AttentionScoreImpl> score;

 private:
  // One decoder step from embedded previous tokens [N, E]; returns h~_t [N, H], advancing the state.
  torch::Tensor decode_step(const torch::Tensor& emb, RnnState& state, torch::Tensor* attention);
  torch::Tensor attend(const torch::Tensor& query, RnnState& state, torch::Tensor* attention);
  torch::Tensor drop(const torch::Tensor& x);
  ModelConfig cfg_;
  int64_t src_vocab_, tgt_vocab_;
  bool lstm_, bahdanau_;
};

}  // namespace parla::models

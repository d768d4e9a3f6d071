#include "models/rnn.h"

#include <limits>

#include <torch/nn/utils/rnn.h>
#include <torch/torch.h>

#include "core/error.h"
#include "models/output_shortlist.h"
#include "models/vocabulary_check.h"
#include "nn/masked_softmax.h"
#include "nn/skipped_initialization.h"
#include "nn/word_dropout.h"

namespace parla::models {

void RnnState::reorder(const torch::Tensor& indices) {
  // Hypothesis row r reads source row r / beam; afterwards every row has its own source row again.
  auto source_rows = beam > 1 ? indices.div(beam, "floor") : indices;
  reorder_beams(indices, source_rows, 1);
}

void RnnState::reorder_beams(const torch::Tensor& rows, const torch::Tensor& sentences, int64_t beam_size) {
  h = h.index_select(1, rows);
  if (c.defined()) c = c.index_select(1, rows);
  feed = feed.index_select(0, rows);
  if (sentences.defined()) {
    annotations = annotations.index_select(0, sentences);
    keys = keys.index_select(0, sentences);
    valid = valid.index_select(0, sentences);
  }
  beam = beam_size;
}

bool RnnState::append(DecoderState& base) {
  auto* other = dynamic_cast<RnnState*>(&base);
  if (!other || other->steps_ != 0 || other->beam != beam || other->c.defined() != c.defined()) return false;
  // The recurrent state is per row; the source side is padded to the longer source (masked, so inert).
  h = torch::cat({h, other->h}, 1);
  if (c.defined()) c = torch::cat({c, other->c}, 1);
  feed = torch::cat({feed, other->feed});
  const int64_t s = std::max(valid.size(1), other->valid.size(1));
  auto pad = [&](const torch::Tensor& t) {
    if (t.size(1) == s) return t;
    auto shape = t.sizes().vec();
    shape[1] = s - t.size(1);
    return torch::cat({t, torch::zeros(shape, t.options())}, 1);
  };
  annotations = torch::cat({pad(annotations), pad(other->annotations)});
  keys = torch::cat({pad(keys), pad(other->keys)});
  valid = torch::cat({pad(valid), pad(other->valid)});
  return true;
}

RnnModel::RnnModel(const ModelConfig& cfg, int64_t src_vocab, int64_t tgt_vocab)
    : cfg_(cfg), src_vocab_(src_vocab), tgt_vocab_(tgt_vocab), lstm_(cfg.rnn_cell == RnnCell::kLstm),
      bahdanau_(cfg.rnn_attention == RnnAttention::kBahdanau) {
  const int64_t e = cfg.embed_dim, h = cfg.rnn_hidden, layers = cfg.rnn_layers;
  check_vocabulary_sizes(cfg, src_vocab, tgt_vocab);
  if (cfg.decoder_start != DecoderStart::kBos)
    throw ConfigError("key 'model.decoder_start': the rnn model starts from bos; '" + std::string(config::name_of(cfg.decoder_start)) +
                      "' is for Transformer models");
  if (cfg.tie_output && e != h)
    throw ConfigError("key 'model.tie_output': the rnn model ties the output projection to the target embedding, "
                      "which needs model.embed_dim (" + std::to_string(e) + ") == model.rnn_hidden (" +
                      std::to_string(h) + ")");
  tgt_embed = register_module("tgt_embed", nn::Embedding(tgt_vocab, e, false, kPadId));
  if (cfg.share_embeddings)
    src_embed = tgt_embed;
  else
    src_embed = register_module("src_embed", nn::Embedding(src_vocab, e, false, kPadId));
  const double between_layers = layers > 1 ? cfg.dropout : 0.0;
  const int64_t dec_in = e + (bahdanau_ ? 2 * h : 0) + (cfg.input_feeding ? h : 0);
  if (lstm_) {
    enc_lstm = register_module("enc_lstm", torch::nn::LSTM(torch::nn::LSTMOptions(e, h).num_layers(layers)
        .bidirectional(true).batch_first(true).dropout(between_layers)));
    dec_lstm = register_module("dec_lstm", torch::nn::LSTM(torch::nn::LSTMOptions(dec_in, h).num_layers(layers)
        .batch_first(true).dropout(between_layers)));
  } else {
    enc_gru = register_module("enc_gru", torch::nn::GRU(torch::nn::GRUOptions(e, h).num_layers(layers)
        .bidirectional(true).batch_first(true).dropout(between_layers)));
    dec_gru = register_module("dec_gru", torch::nn::GRU(torch::nn::GRUOptions(dec_in, h).num_layers(layers)
        .batch_first(true).dropout(between_layers)));
  }
  bridge = register_module("bridge", nn::Linear(2 * h, h));
  combine = register_module("combine", nn::Linear(torch::nn::LinearOptions(3 * h, h).bias(false)));
  if (bahdanau_)
    score = register_module("score", std::make_shared<nn::AdditiveScoreImpl>(h, 2 * h, h));
  else
    score = register_module("score", std::make_shared<nn::GeneralScoreImpl>(h, 2 * h));
  if (!cfg.tie_output) output = register_module("output", nn::Linear(torch::nn::LinearOptions(h, tgt_vocab).bias(false)));
  for (auto* l : {&bridge, &combine, &output})
    if (*l && !nn::initialization_skipped()) torch::nn::init::xavier_uniform_((*l)->weight);
}

int64_t RnnModel::max_positions() const { return std::numeric_limits<int64_t>::max(); }

torch::Tensor RnnModel::drop(const torch::Tensor& x) {
  return cfg_.dropout > 0 && is_training() ? torch::dropout(x, cfg_.dropout, true) : x;
}

std::unique_ptr<RnnState> RnnModel::encode(const torch::Tensor& src) {
  TORCH_CHECK(src.dim() == 2, "src must be [B, S]");
  const int64_t b = src.size(0), s = src.size(1), h = cfg_.rnn_hidden, layers = cfg_.rnn_layers;
  auto state = std::make_unique<RnnState>();
  state->valid = src.ne(kPadId);
  // Packing keeps padding out of the backward direction; an all-padding row is given length 1 (its embedding
  // is the zero pad vector) because packing rejects empty sequences.
  auto lengths = state->valid.sum(1).clamp_min(1).to(torch::kCPU);
  auto packed = torch::nn::utils::rnn::pack_padded_sequence(
      drop(nn::word_dropout(src_embed(src), cfg_.source_word_dropout, is_training())), lengths, true, false);
  auto [out, hn] = [&]() -> std::pair<torch::nn::utils::rnn::PackedSequence, torch::Tensor> {
    if (lstm_) {
      auto r = enc_lstm->forward_with_packed_input(packed);
      return {std::get<0>(r), std::get<0>(std::get<1>(r))};
    }
    auto r = enc_gru->forward_with_packed_input(packed);
    return {std::get<0>(r), std::get<1>(r)};
  }();
  state->annotations = std::get<0>(torch::nn::utils::rnn::pad_packed_sequence(out, true, 0.0, s));  // [B,S,2H]
  // hn [L*2, B, H] ordered (layer, direction) -> [L, B, 2H]
  auto last = hn.view({layers, 2, b, h}).permute({0, 2, 1, 3}).reshape({layers, b, 2 * h});
  state->h = torch::tanh(bridge(last)).contiguous();
  if (lstm_) state->c = torch::zeros_like(state->h);
  state->feed = torch::zeros({b, h}, state->annotations.options());
  state->keys = score->project_keys(state->annotations);
  return state;
}

torch::Tensor RnnModel::attend(const torch::Tensor& query, RnnState& state, torch::Tensor* attention) {
  // The G = N / M hypotheses of a sentence are G query positions over its one row of annotations: one product
  // per sentence, and the annotations are never copied per hypothesis.
  const int64_t N = query.size(0), M = state.keys.size(0);
  TORCH_CHECK(M > 0 && N % M == 0, "rnn attention: ", N, " rows for ", M, " source rows");
  auto scores = score->score(query.reshape({M, N / M, query.size(1)}), state.keys);  // [M, G, S]
  auto alpha = nn::masked_softmax(scores, state.valid.unsqueeze(1));
  if (attention) *attention = alpha.reshape({N, alpha.size(2)});
  return torch::bmm(alpha, state.annotations).reshape({N, state.annotations.size(2)});  // [N, 2H]
}

torch::Tensor RnnModel::decode_step(const torch::Tensor& emb, RnnState& state, torch::Tensor* attention) {
  std::vector<torch::Tensor> inputs{emb};
  torch::Tensor context;
  if (bahdanau_) {
    context = attend(state.h[-1], state, attention);  // on s_{t-1}
    inputs.push_back(context);
  }
  if (cfg_.input_feeding) inputs.push_back(state.feed);
  auto x = torch::cat(inputs, -1).unsqueeze(1);     // [N, 1, in]
  torch::Tensor out;
  if (lstm_) {
    auto r = dec_lstm(x, std::make_tuple(state.h, state.c));
    out = std::get<0>(r);
    state.h = std::get<0>(std::get<1>(r));
    state.c = std::get<1>(std::get<1>(r));
  } else {
    auto r = dec_gru(x, state.h);
    out = std::get<0>(r);
    state.h = std::get<1>(r);
  }
  auto s_t = out.squeeze(1);
  torch::Tensor attentional;
  if (bahdanau_) {
    attentional = torch::tanh(combine(torch::cat({s_t, context}, -1)));
  } else {
    context = attend(s_t, state, attention);  // on s_t
    attentional = torch::tanh(combine(torch::cat({context, s_t}, -1)));
  }
  state.feed = attentional;
  state.steps_ += 1;
  return attentional;
}

torch::Tensor RnnModel::forward(const torch::Tensor& src, const torch::Tensor& tgt_in) {
  TORCH_CHECK(tgt_in.dim() == 2 && tgt_in.size(0) == src.size(0), "tgt_in must be [B, T] with the batch of src");
  auto state = encode(src);
  auto emb = drop(nn::word_dropout(tgt_embed(tgt_in), cfg_.target_word_dropout, is_training()));
  std::vector<torch::Tensor> outs;
  for (int64_t t = 0; t < tgt_in.size(1); ++t) outs.push_back(decode_step(emb.select(1, t), *state, nullptr));
  auto h = drop(torch::stack(outs, 1));
  return output ? output(h) : tgt_embed->project(h);
}

std::unique_ptr<DecoderState> RnnModel::start(const torch::Tensor& src) { return encode(src); }

torch::Tensor RnnModel::step(const torch::Tensor& prev, DecoderState& base_state, torch::Tensor* attention) {
  auto& state = dynamic_cast<RnnState&>(base_state);
  auto h = decode_step(tgt_embed(prev.view({-1})), state, attention);
  auto logits = output ? output(h) : tgt_embed->project(h);
  // A shortlist saves nothing here (the projection is computed whole), but the output is what it allows.
  if (state.shortlist)
    return shortlist_log_softmax(logits.index_select(1, state.shortlist->columns.to(logits.device())),
                                 *state.shortlist, vocab_size());
  return torch::log_softmax(logits, -1);
}

}  // namespace parla::models

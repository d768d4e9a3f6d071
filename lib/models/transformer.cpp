#include "models/transformer.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "models/vocabulary_check.h"
#include "runtime/runtime.h"
#include "nn/log_softmax.h"
#include "nn/skipped_initialization.h"
#include "nn/word_dropout.h"

namespace parla::models {

namespace {
// Rows x d_model up to which a decoder step (and source positions x d_model up to which the encoder) runs on one
// thread: 16 rows at d 256, 8 at d 512.
constexpr int64_t kSmallStepValues = 4096;

// Whether work over `ids` (a step's previous tokens, or a batch of source positions) of d_model values each is small
// enough for the calling thread alone (runtime::SingleThreadScope).
bool small_on_cpu(const torch::Tensor& ids, int64_t d_model) {
  return ids.device().is_cpu() && ids.numel() * d_model <= kSmallStepValues;
}
}  // namespace

void TransformerState::select_sentences(const torch::Tensor& sentences) {
  // On the CPU the fused step reads memory rows through cache.memory_rows: sentences that leave cost no copy of
  // the encoder's keys and values (docs/BENCHMARKS.md, "Figures behind the code's choices").
  if (memory_valid.device().is_cpu()) {
    cache.select_memory_rows(sentences);
    return;
  }
  memory_valid = memory_valid.index_select(0, sentences);
  cache.select_memory(sentences);
}

void TransformerState::reorder(const torch::Tensor& indices) {
  // Hypothesis row r reads memory row r / beam; afterwards every row has its own memory row again.
  select_sentences(beam > 1 ? indices.div(beam, "floor") : indices);
  cache.select_self(indices);
  if (row_start.defined()) row_start = row_start.index_select(0, indices);
  beam = 1;
  rebase();
}

void TransformerState::reorder_beams(const torch::Tensor& rows, const torch::Tensor& sentences, int64_t beam_size) {
  cache.select_self(rows);
  if (row_start.defined()) row_start = row_start.index_select(0, rows);
  if (sentences.defined()) {
    select_sentences(sentences);
    rebase();  // only when sentences left: until then no row's start changed
  }
  beam = beam_size;
}

namespace {

// t grown to `size` along `dim` with zeros (false for bool): padding that masks and exact zeros make inert.
torch::Tensor pad_to(const torch::Tensor& t, int64_t dim, int64_t size) {
  if (t.size(dim) >= size) return t;
  auto shape = t.sizes().vec();
  shape[dim] = size - t.size(dim);
  return torch::cat({t, torch::zeros(shape, t.options())}, dim);
}

// Rows of a and b, after padding both to the longer source.
torch::Tensor join(const torch::Tensor& a, const torch::Tensor& b, int64_t source_dim) {
  const int64_t s = std::max(a.size(source_dim), b.size(source_dim));
  return torch::cat({pad_to(a, source_dim, s), pad_to(b, source_dim, s)});
}

}  // namespace

bool TransformerState::append(DecoderState& base) {
  auto* other = dynamic_cast<TransformerState*>(&base);
  if (!other || other->steps_ != 0 || other->beam != beam || other->row_start.defined() ||
      other->cache.cross_k.size() != cache.cross_k.size())
    return false;
  cache.gather_memory(memory_valid);
  other->cache.gather_memory(other->memory_valid);
  const int64_t rows = memory_valid.size(0) * beam, added = other->memory_valid.size(0) * other->beam;
  memory_valid = join(memory_valid, other->memory_valid, 1);
  for (size_t i = 0; i < cache.cross_k.size(); ++i) {
    cache.cross_k[i] = join(cache.cross_k[i], other->cache.cross_k[i], 2);  // [M, H, S, Dh]
    cache.cross_v[i] = join(cache.cross_v[i], other->cache.cross_v[i], 2);
  }
  if (steps_ == 0) return true;  // nothing decoded yet: the new rows are just more rows
  for (auto& c : cache.self) c.add_rows(added);
  auto options = torch::dtype(torch::kLong).device(memory_valid.device());
  if (!row_start.defined()) row_start = torch::zeros({rows}, options);
  row_start = torch::cat({row_start, torch::full({added}, steps_, options)});
  return true;
}

void TransformerState::expect_steps(int64_t more) {
  for (auto& c : cache.self) c.kv.expect(more);
}

void TransformerState::rebase() {
  if (!row_start.defined() || row_start.numel() == 0) return;
  // Amortised: the tables are renumbered once the oldest row's start has moved on by a few dozen steps.
  const int64_t oldest = row_start.min().item<int64_t>();
  if (oldest < 32) return;
  for (auto& c : cache.self) c.rebase(oldest);
  row_start = row_start - oldest;
  steps_ -= oldest;
}

TransformerModel::TransformerModel(const ModelConfig& cfg, int64_t src_vocab, int64_t tgt_vocab)
    : cfg_(cfg), src_vocab_(src_vocab), tgt_vocab_(tgt_vocab) {
  check_vocabulary_sizes(cfg, src_vocab, tgt_vocab);
  tgt_embed = register_module("tgt_embed", nn::Embedding(tgt_vocab, cfg.d_model, cfg.scale_embeddings, kPadId));
  if (cfg.share_embeddings)
    src_embed = tgt_embed;
  else
    src_embed = register_module("src_embed", nn::Embedding(src_vocab, cfg.d_model, cfg.scale_embeddings, kPadId));
  src_positions = register_module(
      "src_positions", nn::PositionalEncoding(cfg.positions, cfg.max_positions, cfg.d_model, cfg.sinusoidal_layout));
  tgt_positions = register_module(
      "tgt_positions", nn::PositionalEncoding(cfg.positions, cfg.max_positions, cfg.d_model, cfg.sinusoidal_layout));
  encoder = register_module("encoder", TransformerEncoder(cfg));
  decoder = register_module("decoder", TransformerDecoder(cfg));
  if (!cfg.tie_output)
    output_weight = register_parameter("output_weight", nn::initial_normal_table(tgt_vocab, cfg.d_model));
  if (cfg.output_bias)
    output_bias = register_parameter("output_bias", nn::initialization_skipped() ? torch::empty({tgt_vocab})
                                                                                 : torch::zeros({tgt_vocab}));
}

int64_t TransformerModel::max_positions() const {
  return std::min(src_positions->max_positions(), tgt_positions->max_positions());
}

torch::Tensor TransformerModel::embed(nn::Embedding& table, nn::PositionalEncoding& positions, const torch::Tensor& ids,
                                      int64_t offset, double word_dropout) {
  // Word dropout removes the token, not its position: positions are added to the dropped rows too.
  auto x = nn::word_dropout(table(ids), word_dropout, is_training()) +
           positions(ids.size(1), offset, table->weight.options()).to(table->weight.dtype());
  return cfg_.dropout > 0 && is_training() ? torch::dropout(x, cfg_.dropout, true) : x;
}

torch::Tensor TransformerModel::encode(const torch::Tensor& src) {
  TORCH_CHECK(src.dim() == 2, "src must be [B, S]");
  return encoder(embed(src_embed, src_positions, src, 0, cfg_.source_word_dropout), src.ne(kPadId));
}

torch::Tensor TransformerModel::output_logits(const torch::Tensor& hidden, torch::Tensor* storage) {
  // The bias joins the logits as they are written (packed: the same sum) or in place (no second [N, V] tensor:
  // an OPUS-MT model's 58k-entry bias at every step); not inside int8's dequantization, whose multiply-add would
  // round once where the sum of two steps rounds twice.
  if (output_packed) return nn::packed_linear(hidden, *output_packed, output_bias, storage);
  if (!output_weight.defined()) return tgt_embed->project(hidden, output_bias, storage);
  auto logits = output_int8 ? nn::int8_linear(hidden, *output_int8, {}, storage)
                            : torch::matmul(hidden, output_weight.t());
  return output_bias.defined() ? logits.add_(output_bias.to(logits.dtype())) : logits;
}

torch::Tensor TransformerModel::shortlist_logits(const torch::Tensor& hidden, TransformerState& state) {
  const OutputShortlist& s = *state.shortlist;
  auto& p = state.shortlist_projection;
  if (p.shortlist != &s || p.version != s.version) {
    p = {};
    p.shortlist = &s;
    p.version = s.version;
    const nn::Int8Matrix* int8 = output_int8 ? output_int8.get() : output_weight.defined() ? nullptr : tgt_embed->int8();
    const nn::PackedMatrix* packed =
        output_packed ? output_packed.get() : output_weight.defined() ? nullptr : tgt_embed->packed_projection();
    if (int8)
      p.int8 = std::make_shared<const nn::Int8Matrix>(int8->select_rows(s.columns));
    else if (packed)
      p.packed = std::make_shared<const nn::PackedMatrix>(packed->select_rows(s.columns));
    else
      p.weight = (output_weight.defined() ? output_weight : tgt_embed->weight)
                     .index_select(0, s.columns.to(hidden.device()));
    if (output_bias.defined()) p.bias = output_bias.index_select(0, s.columns.to(output_bias.device()));
  }
  auto logits = p.int8     ? nn::int8_linear(hidden, *p.int8)
                : p.packed ? nn::packed_linear(hidden, *p.packed)
                           : torch::matmul(hidden, p.weight.t());
  return p.bias.defined() ? logits + p.bias.to(logits.dtype()) : logits;
}

torch::Tensor TransformerModel::forward(const torch::Tensor& src, const torch::Tensor& tgt_in) {
  TORCH_CHECK(tgt_in.dim() == 2 && tgt_in.size(0) == src.size(0), "tgt_in must be [B, T] with the batch of src");
  auto memory = encode(src);
  auto h = decoder->forward(embed(tgt_embed, tgt_positions, tgt_in, 0, cfg_.target_word_dropout), memory,
                            src.ne(kPadId));
  return output_logits(h);
}

std::unique_ptr<DecoderState> TransformerModel::start(const torch::Tensor& src) {
  runtime::SingleThreadScope small(small_on_cpu(src, cfg_.d_model));
  auto state = std::make_unique<TransformerState>();
  auto memory = encode(src);
  state->memory_valid = src.ne(kPadId);
  state->cache = decoder->start(memory);
  return state;
}

torch::Tensor TransformerModel::decoder_output(const torch::Tensor& prev, TransformerState& state,
                                              torch::Tensor* attention) {
  torch::Tensor x;
  if (state.row_start.defined()) {  // rows at different positions (continuous batching)
    auto ids = prev.view({-1, 1});
    auto positions = tgt_positions->at(state.row_start.neg().add(state.steps_), state.steps_ + 1,
                                       tgt_embed->weight.options());
    x = tgt_embed(ids) + positions.to(tgt_embed->weight.dtype()).unsqueeze(1);
    if (cfg_.dropout > 0 && is_training()) x = torch::dropout(x, cfg_.dropout, true);
  } else {
    x = embed(tgt_embed, tgt_positions, prev.view({-1, 1}), state.steps_);
  }
  torch::Tensor weights;
  if (state.cache.memory_rows.defined() && !decoder->fused_step_for(x, attention != nullptr))
    state.cache.gather_memory(state.memory_valid);
  auto h = decoder->step(x, state.cache, state.memory_valid, attention ? &weights : nullptr);
  state.steps_ += 1;
  if (attention) *attention = weights.mean(1).squeeze(1);  // [N, H, 1, S] -> [N, S]
  return h.squeeze(1);
}

torch::Tensor TransformerModel::step(const torch::Tensor& prev, DecoderState& base_state, torch::Tensor* attention) {
  auto& state = dynamic_cast<TransformerState&>(base_state);
  // A step of a few rows (beam 5 at batch 1: 5 x 256 values) on the calling thread alone: waking LibTorch's other
  // threads for its layer norms and softmax cost more than they saved (int8, beam 5, batch 1, two threads: 451 ->
  // 974 target tokens/s). The same results: nothing in a step depends on how its work is split.
  runtime::SingleThreadScope small(small_on_cpu(prev, cfg_.d_model));
  auto h = decoder_output(prev, state, attention);
  if (state.shortlist) return shortlist_log_softmax(shortlist_logits(h, state), *state.shortlist, tgt_vocab_);
  return nn::log_softmax_rows(output_logits(h));
}

bool TransformerModel::has_step_logits(const DecoderState& state) const { return state.shortlist == nullptr; }

torch::Tensor TransformerModel::step_logits(const torch::Tensor& prev, DecoderState& base_state) {
  auto& state = dynamic_cast<TransformerState&>(base_state);
  TORCH_CHECK(!state.shortlist, "step_logits: the state has a shortlist (use step)");
  runtime::SingleThreadScope small(small_on_cpu(prev, cfg_.d_model));
  return output_logits(decoder_output(prev, state, nullptr), &state.logits_buffer);
}

}  // namespace parla::models

#pragma once
// The one decoding interface that the translator (and validation in training) uses for every sequence-to-
// sequence model: encode once, then step one target token at a time with an incremental state, reordering the
// state's batch rows as beam search keeps, drops and duplicates hypotheses.
#include <memory>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "text/special_ids.h"

namespace parla::models {

struct OutputShortlist;

// Everything a decoder step needs besides the previous token: the encoder output and source padding mask,
// cached cross-attention keys/values, the self-attention key/value cache (Transformer) or the hidden state and
// input-feeding vector (RNN). Rows are hypotheses.
class DecoderState {
 public:
  virtual ~DecoderState() = default;
  // Keeps rows `indices` (int64 [N], may repeat rows and change the row count), in that order.
  virtual void reorder(const torch::Tensor& indices) = 0;
  // Beam search's reorder: new rows come in groups of `beam` consecutive rows per sentence, `rows` as in
  // reorder, and `sentences` int64 [N / beam] names the old group each new group comes from (undefined when the
  // groups are the same sentences as before). A state that keeps per-sentence data (the encoder output) once
  // per group selects it by sentence instead of copying it for every hypothesis at every step; the default
  // reorders every row.
  virtual void reorder_beams(const torch::Tensor& rows, const torch::Tensor& sentences, int64_t beam) {
    (void)sentences;
    (void)beam;
    reorder(rows);
  }
  // Continuous batching: the rows of `other` (fresh from start() on the same model, no step taken, its rows
  // already expanded to the same beam size as this state's) join after this state's rows and start decoding
  // at the next step, at their own position 0. Each row's results are then those of a batch of its own.
  // False, changing nothing, when the state cannot do this (the caller decodes such sentences separately).
  virtual bool append(DecoderState& other) {
    (void)other;
    return false;
  }
  // Number of decoding steps taken so far.
  virtual int64_t steps() const = 0;
  // A hint from a search that knows its length limit: no row takes more than `more` further steps. A state may
  // stop its caches' growth there (nn::KeyValueCache::expect); taking more steps still works.
  virtual void expect_steps(int64_t more) { (void)more; }

  // When set (by a search with a lexical shortlist), step() computes the output layer over these per-row
  // vocabularies only (models/output_shortlist.h) and returns -inf for every other token. The search owns it and
  // keeps its rows in step with this state's.
  const OutputShortlist* shortlist = nullptr;
};

class Seq2SeqModel : public torch::nn::Module {
 public:
  // src: int64 [B, S] padded with kPadId (source ends with kEosId). Runs the encoder once.
  virtual std::unique_ptr<DecoderState> start(const torch::Tensor& src) = 0;

  // One decoder step. prev: int64 [N] (start_id() at the first step). Returns log-probabilities [N, V] of the next
  // token and advances the state (over state.shortlist's vocabularies when set). When `attention` is non-null it receives the cross-attention weights
  // [N, S] of this step (averaged over heads), for alignments.
  virtual torch::Tensor step(const torch::Tensor& prev, DecoderState& state, torch::Tensor* attention = nullptr) = 0;

  // Whether step_logits() can take `state`'s next step (false by default, and with a shortlist set).
  virtual bool has_step_logits(const DecoderState& state) const {
    (void)state;
    return false;
  }
  // step() without its final log-softmax: the output layer's logits [N, V], the state advanced as step() advances
  // it. For a search that needs only the best token and no score (decode/greedy_choice.h).
  virtual torch::Tensor step_logits(const torch::Tensor& prev, DecoderState& state) {
    (void)prev;
    (void)state;
    TORCH_CHECK(false, "step_logits: this model computes log-probabilities only (see has_step_logits)");
  }

  // Teacher-forced training pass. src [B, S], tgt_in [B, T] (starts with start_id()) -> logits [B, T, V].
  virtual torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt_in) = 0;

  virtual int64_t vocab_size() const = 0;
  // Source vocabulary size (what the model was built with; checkpoints store it). 0 when not known.
  virtual int64_t source_vocab_size() const { return 0; }
  // Longest sequence the model can take (learned positions); INT64_MAX when unlimited.
  virtual int64_t max_positions() const = 0;
  // The token the decoder starts from (model.decoder_start): kBosId, or kPadId for models imported from
  // Marian. Searches start from it and never output it.
  virtual int64_t start_id() const { return kBosId; }
  // Whether step() honours DecoderState::shortlist.
  virtual bool supports_shortlist() const { return false; }
};

}  // namespace parla::models

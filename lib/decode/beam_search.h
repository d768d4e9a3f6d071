#pragma once
// Batched beam search (Sutskever et al. 2014; GNMT length normalisation, Wu et al. 2016). All sentences of a
// batch search together: one decoder step for B x beam rows, the encoder run once, the decoder's key/value
// caches reordered with the surviving hypotheses, and sentences removed from the batch once finished.
//
// Each step expands every live hypothesis by every token, keeps the 2 x beam best candidates per sentence
// (fairseq's trick, so that beam live hypotheses remain after EOS candidates are set aside); an EOS candidate
// ranked within the first `beam` is a finished hypothesis, scored log P / lp(|Y|).
//
// Stopping rule, per sentence: it is done when
//   (a) it has `beam` finished hypotheses (fairseq's rule; the common case), or
//   (b) it has `n_best` finished hypotheses and no live hypothesis can still beat the n-best-th of them: log
//       probabilities only fall, so a live prefix with log-prob L can at best finish with L / lp(max length)
//       (for alpha >= 0 and L <= 0), an upper bound that is exact when alpha = 0, or
//   (c) it reached its maximum length (EOS is forced there), or no live hypothesis is left.
// Ties between equal scores are broken by the lower flat index (beam-major, then token id) and, among
// finished hypotheses, by the token sequence, so the result is a deterministic function of the scores.
#include <memory>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "decode/beam_candidates.h"
#include "decode/hypothesis.h"
#include "decode/search_options.h"
#include "models/output_shortlist.h"
#include "models/seq2seq.h"

namespace parla::decode {

// The search as a stepper, so that sentences can join it between steps and leave it as they finish
// (continuous batching, for parla-serve): a sentence that joins at step t starts at its own step 0, and its
// result is the one a batch of its own would give (the decoder state keeps each row's positions).
class BeamSearch {
 public:
  BeamSearch(models::Seq2SeqModel& model, const SearchOptions& o);
  ~BeamSearch();
  BeamSearch(const BeamSearch&) = delete;
  BeamSearch& operator=(const BeamSearch&) = delete;

  // Sentences src [B, S] (PAD-padded, each row ending with EOS) join the search at the next step; `ids` (B
  // entries) name them in step()'s results. UsageError when the model's state cannot take rows into a
  // search that is already running.
  void add(const torch::Tensor& src, const std::vector<int64_t>& ids);
  // One decoder step for every sentence in the search; returns the sentences that finished at this step with
  // their min(n_best, found) best hypotheses, best first.
  std::vector<std::pair<int64_t, NBestList>> step();
  // Drops the sentences named by `ids` from the search (their client left), between steps; unknown ids are
  // ignored. The others' results do not change.
  void remove(const std::vector<int64_t>& ids);
  // Sentences being searched.
  size_t size() const { return active_.size(); }
  // Hypothesis rows (sentences x beam) of the next step (a fresh search's first step runs one decoder row per
  // sentence).
  int64_t rows() const { return static_cast<int64_t>(rows_.size()); }

 private:
  struct Live {
    std::vector<int64_t> tokens;
    float log_prob;
    std::vector<std::vector<float>> attention;
  };
  struct Sentence {
    int64_t id, limit, source_length, joined;
    std::vector<Hypothesis> finished;
    std::vector<int64_t> vocabulary;  // with a shortlist: its output vocabulary, shortlist_.vocabularies[slot]
    int32_t slot = 0;
  };

  models::Seq2SeqModel& model_;
  SearchOptions o_;
  int64_t K_, V_, n_best_, candidates_;
  std::unique_ptr<models::DecoderState> state_;
  torch::Tensor prev_;             // [rows]: each row's last token
  std::vector<Sentence> active_;   // block a of K rows belongs to active_[a]
  std::vector<Live> rows_;
  int64_t steps_ = 0;              // steps of this state (a sentence's own step is steps_ - joined)
  bool first_step_single_ = false;  // state_ and prev_ hold one row per sentence (a fresh search's first step)
  // Gives state_ and prev_ K rows per sentence again (rows 1..K-1 copies of row 0, dead in rows_) when a
  // sentence joins or leaves before the first step.
  void expand_first_step();
  std::vector<std::vector<Candidate>> best_of_step(int64_t P, torch::Tensor& attention);
  models::OutputShortlist shortlist_;  // with o_.shortlist: the searched sentences' vocabularies (state_ points here)
};

// src: int64 [B, S] (PAD-padded, each row ends with EOS). Returns per row the min(n_best, found) best
// hypotheses, best first.
std::vector<NBestList> beam_search(models::Seq2SeqModel& model, const torch::Tensor& src, const SearchOptions& o);

}  // namespace parla::decode

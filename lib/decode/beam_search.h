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
#include <vector>

#include <torch/types.h>

#include "decode/hypothesis.h"
#include "decode/search_options.h"
#include "models/seq2seq.h"

namespace parla::decode {

// src: int64 [B, S] (PAD-padded, each row ends with EOS). Returns per row the min(n_best, found) best
// hypotheses, best first.
std::vector<NBestList> beam_search(models::Seq2SeqModel& model, const torch::Tensor& src, const SearchOptions& o);

}  // namespace parla::decode

#pragma once
// The output layer restricted to per-sentence vocabularies (a lexical shortlist, decode/lexical_shortlist.h). The
// decoder computes logits only for `columns`, the union of the vocabularies of the sentences in the batch, and each
// row's log-softmax runs over its own sentence's vocabulary alone, gathered in token order: so a row's
// log-probabilities are the same bits whichever other sentences share its batch (batch invariance holds with a
// shortlist too), and equal to the log-softmax of its logits over that vocabulary. Tokens outside a row's vocabulary
// get -inf, so every search works on [rows, V] as without a shortlist.
#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace parla::models {

struct OutputShortlist {
  // Target ids the decoder computes, sorted (int64 [U], CPU).
  torch::Tensor columns;
  // Per sentence: its vocabulary as sorted positions within `columns`.
  std::vector<std::vector<int32_t>> vocabularies;
  // Per decoder row of the next step: its sentence's entry of `vocabularies`. The search keeps it in step with the
  // rows (beam search's reorders, finished sentences leaving).
  std::vector<int32_t> row_vocabulary;
  // Changes whenever `columns` does: models keep their output weights sliced to `columns` until it changes.
  uint64_t version = 0;

  // Replaces the sentences' vocabularies (sorted target ids < vocab each): columns become their union, filled up
  // with ids of no sentence's vocabulary to a size of few distinct values (padded_width), and version moves on.
  void set_vocabularies(const std::vector<std::vector<int64_t>>& vocabularies_by_id, int64_t vocab);
};

// The number of columns a union of `width` ids is filled up to (at most `vocab`): a multiple of 256, or of an eighth
// of the largest power of two <= width when that is larger, so that 8 sizes fall in each octave and the padding
// stays under width / 8 + 256 columns. The int8 products build (JIT-compile) a oneDNN primitive for every new
// output width and keep it: exact widths gave a new one for almost every sentence at batch 1 (milliseconds each,
// and a cache that grew without bound in a server).
int64_t padded_width(int64_t width, int64_t vocab);

// logits float [N, U] over `s.columns` (N = s.row_vocabulary.size()) -> log-probabilities float [N, vocab]: row r's
// log-softmax over its vocabulary's columns, -inf elsewhere.
torch::Tensor shortlist_log_softmax(const torch::Tensor& logits, const OutputShortlist& s, int64_t vocab);

}  // namespace parla::models

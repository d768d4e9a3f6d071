#pragma once
// Continuous batching (for parla-serve): a running beam search over a loaded model that new sentences join at
// a step boundary and finished ones leave, so that a long sentence does not hold short ones back and the batch
// refills as it empties. Each sentence's translation is the one Translator::translate_batch gives it (the
// decoder state keeps each row's own positions; tests/decode/test_translation_stream.cpp checks it to the bit).
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "decode/beam_search.h"
#include "decode/translation.h"
#include "text/sentencepiece_vocab.h"

namespace parla::decode {

// Hypotheses -> what a caller sees: detokenised text, score, length.
std::vector<Translation> to_translations(const NBestList& hypotheses, const text::SentencePieceVocab& target_vocab);

class TranslationStream {
 public:
  // Made by Translator::open_stream, which outlives it.
  TranslationStream(models::Seq2SeqModel& model, const text::SentencePieceVocab& target_vocab,
                    const SearchOptions& options, const c10::Device& device, c10::ScalarType precision);

  // Source piece ids (non-empty, without EOS) join the search at the next step, named by `ids` in step()'s
  // results.
  void add(const std::vector<std::vector<int>>& sources, const std::vector<int64_t>& ids);
  // One decoder step; the sentences that finished at it, each with its n-best translations, best first.
  std::vector<std::pair<int64_t, std::vector<Translation>>> step();
  // Drops sentences (their client left) between steps.
  void remove(const std::vector<int64_t>& ids) { search_.remove(ids); }
  // Sentences in the search, and decoder rows (sentences x beam).
  size_t size() const { return search_.size(); }
  int64_t rows() const { return search_.rows(); }

 private:
  const text::SentencePieceVocab& target_vocab_;
  c10::Device device_;
  c10::ScalarType precision_;
  BeamSearch search_;
};

}  // namespace parla::decode

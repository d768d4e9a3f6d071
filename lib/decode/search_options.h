#pragma once
// The settings of one search, shared by greedy, beam search and sampling, passed with each call (as CTranslate2's
// translate_batch(tokens, options)): parla-translate searches with the options its config describes, parla-serve
// with a copy whose beam size and n-best a request may override. Built from the config's `decoding` section
// (core/config/decoding_config.h documents every key); its defaults are that section's, written there once.
// Torch-free (parla-serve's queue holds them).
#include <cstdint>
#include <memory>
#include <tuple>
#include <vector>

#include "core/config/decoding_config.h"

namespace parla::decode {

class LexicalShortlist;

struct SearchOptions {
  // The options of the `decoding` keys' defaults.
  SearchOptions() : SearchOptions(DecodingConfig{}) {}
  // The one place the `decoding` keys become search options.
  static SearchOptions from_config(const DecodingConfig& d) { return SearchOptions(d); }

  int beam_size;                  // 1 with n_best 1 = greedy
  int n_best;                     // hypotheses returned per sentence
  double length_penalty;          // GNMT alpha
  double max_length_factor;       // max output tokens = a * source tokens + b ...
  int max_length_offset;          // ... also capped by the model's positions
  int min_length;                 // EOS forbidden before this many tokens
  bool attention;                 // keep cross-attention per target token (alignments)
  bool sampling;                  // sample instead of search
  double temperature;
  int top_k;                      // 0 = whole vocabulary
  // Beam search picks its candidates with tensor ops where the log-probabilities are (always so off the CPU);
  // on the CPU a scan is faster and is the default. Tests set this to run the tensor path on the CPU.
  bool device_candidates = false;
  // Whether the caller reads the hypotheses' scores. Without them greedy search picks its tokens from the output
  // layer's logits and skips the log-softmax (decode/greedy_choice.h: the same tokens), leaving every score NaN.
  // parla-translate prints scores only with n-best lists; parla-serve returns them always.
  bool scores = true;
  // decoding.shortlist, loaded (decode/lexical_shortlist.h): each sentence's output is restricted to its
  // vocabulary; null = the whole vocabulary. The translator sets it; searches share it.
  std::shared_ptr<const LexicalShortlist> shortlist;
  // Target ids every output starts with, forced (decoding.target_prefix, or the language token of
  // decoding.target_lang: CTranslate2's target_prefix, transformers' forced_bos_token_id). They are part of the
  // output; each scores 0 (given, not chosen, as transformers scores a forced token).
  std::vector<int64_t> target_prefix;

  // Every field, once: equality (and anything else that must see them all) is built on this list.
  auto fields() const {
    return std::tie(beam_size, n_best, length_penalty, max_length_factor, max_length_offset, min_length, attention,
                    sampling, temperature, top_k, device_candidates, scores, shortlist, target_prefix);
  }

 private:
  explicit SearchOptions(const DecodingConfig& d)
      : beam_size(d.beam_size),
        n_best(d.n_best),
        length_penalty(d.length_penalty),
        max_length_factor(d.max_length_factor),
        max_length_offset(d.max_length_offset),
        min_length(d.min_length),
        attention(d.alignment != AlignmentOutput::kNone),
        sampling(d.sampling),
        temperature(d.temperature),
        top_k(d.top_k) {}
};

// Whether two searches are the same search: sentences are batched together only then (every field counts, so
// that a batch's results are those each sentence would get alone; parla-serve's differ in beam size and n-best).
inline bool operator==(const SearchOptions& a, const SearchOptions& b) { return a.fields() == b.fields(); }
inline bool operator!=(const SearchOptions& a, const SearchOptions& b) { return !(a == b); }

// Output tokens allowed for a source of `source_tokens` pieces (without EOS): floor(a * n + b), at least 1,
// at most max_positions - 1 (the decoder's position of BOS is taken). EOS is forced after that many tokens.
int64_t max_output_length(const SearchOptions& o, int64_t source_tokens, int64_t max_positions);

}  // namespace parla::decode

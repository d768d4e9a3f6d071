#pragma once
// The settings of one search, shared by greedy, beam search and sampling; built from the config's `decoding`
// section (core/config/decoding_config.h documents every key).
#include <cstdint>
#include <vector>

#include "core/config/decoding_config.h"

namespace parla::decode {

struct SearchOptions {
  int beam_size = 5;              // 1 with n_best 1 = greedy
  int n_best = 1;                 // hypotheses returned per sentence
  double length_penalty = 0.6;    // GNMT alpha
  double max_length_factor = 3;   // max output tokens = a * source tokens + b ...
  int max_length_offset = 10;     // ... also capped by the model's positions
  int min_length = 0;             // EOS forbidden before this many tokens
  bool attention = false;         // keep cross-attention per target token (alignments)
  bool sampling = false;          // sample instead of search
  double temperature = 1.0;
  int top_k = 0;                  // 0 = whole vocabulary
  // Beam search picks its candidates with tensor ops where the log-probabilities are (always so off the CPU);
  // on the CPU a scan is faster and is the default. Tests set this to run the tensor path on the CPU.
  bool device_candidates = false;

  static SearchOptions from_config(const DecodingConfig& d);
};

// Output tokens allowed for a source of `source_tokens` pieces (without EOS): floor(a * n + b), at least 1,
// at most max_positions - 1 (the decoder's position of BOS is taken). EOS is forced after that many tokens.
int64_t max_output_length(const SearchOptions& o, int64_t source_tokens, int64_t max_positions);

}  // namespace parla::decode

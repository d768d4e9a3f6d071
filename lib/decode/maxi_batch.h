#pragma once
// Batching for translation (Marian's maxi-batch): a window of many batches is read ahead, sorted by source
// length so that each batch holds sentences of similar length (little padding, similar output lengths), cut
// into batches, and after translation the outputs are put back in input order. Torch-free.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/config/decoding_config.h"

namespace parla::decode {

// decoding.batch_size, batch_tokens and maxi_batch (their defaults are the config's: from_config makes one).
struct BatchLimits {
  size_t batch_size{};    // sentences per batch, used when batch_tokens is 0
  size_t batch_tokens{};  // padded tokens per batch (longest source x sentences); 0 = by sentences
  size_t maxi_batch{};    // batches per sorted window

  static BatchLimits from_config(const DecodingConfig& decoding) {
    return {static_cast<size_t>(decoding.batch_size), static_cast<size_t>(decoding.batch_tokens),
            static_cast<size_t>(decoding.maxi_batch)};
  }
};

// Batching by sentences also caps a batch at batch_size x this many padded source tokens. Decoding memory grows
// with rows x source length x output length (attention caches of every beam), so a window of long lines (random
// bytes, a file without line breaks: each cut to the source limit) would otherwise put batch_size of the longest
// possible sources into one batch (6.7 GB for the Multi30k model, issue 35). Batches of sentences up to 127
// pieces, i.e. of real text, are exactly what batch_size asks for.
constexpr size_t kSentenceBatchTokensPerSentence = 128;

// The padded source tokens a batch may hold: batch_tokens, or batch_size x kSentenceBatchTokensPerSentence.
size_t batch_token_budget(const BatchLimits& limits);

// How many sentences to read ahead into one window. With a token budget the window is sized in sentences
// assuming short lines; plan_batches cuts it by tokens anyway.
size_t window_sentences(const BatchLimits& limits);

// Splits the sentences of one window (given their source lengths) into batches of indices into `lengths`.
// Sentences are sorted by length, longest first, ties broken by position, so the plan is a deterministic
// function of the lengths. A batch never exceeds batch_token_budget() of padded source unless one sentence alone
// does (it then forms its own batch), nor batch_size sentences when batching by sentences; every index appears in
// exactly one batch.
std::vector<std::vector<size_t>> plan_batches(const std::vector<size_t>& lengths, const BatchLimits& limits);

}  // namespace parla::decode

#pragma once
// Batching for translation (Marian's maxi-batch): a window of many batches is read ahead, sorted by source
// length so that each batch holds sentences of similar length (little padding, similar output lengths), cut
// into batches, and after translation the outputs are put back in input order. Torch-free.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace parla::decode {

struct BatchLimits {
  size_t batch_size = 32;  // sentences per batch, used when batch_tokens is 0
  size_t batch_tokens = 0; // padded tokens per batch (longest source x sentences); 0 = by sentences
  size_t maxi_batch = 20;  // batches per sorted window
};

// How many sentences to read ahead into one window. With a token budget the window is sized in sentences
// assuming short lines; plan_batches cuts it by tokens anyway.
size_t window_sentences(const BatchLimits& limits);

// Splits the sentences of one window (given their source lengths) into batches of indices into `lengths`.
// Sentences are sorted by length, longest first, ties broken by position, so the plan is a deterministic
// function of the lengths. A batch never exceeds batch_tokens of padded source unless one sentence alone does
// (it then forms its own batch); every index appears in exactly one batch.
std::vector<std::vector<size_t>> plan_batches(const std::vector<size_t>& lengths, const BatchLimits& limits);

}  // namespace parla::decode

#pragma once
// The search options of a request that sets beam_size and n_best, the rest the `decoding` defaults: what the
// batcher groups sentences by.
#include "decode/search_options.h"

namespace parla::testing {

inline decode::SearchOptions search_with(int beam_size, int n_best) {
  decode::SearchOptions o;
  o.beam_size = beam_size;
  o.n_best = n_best;
  return o;
}

}  // namespace parla::testing

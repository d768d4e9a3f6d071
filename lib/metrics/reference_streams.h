#pragma once
// Several references per segment arrive as parallel streams (one per reference file, as in sacreBLEU's API).
#include <string>
#include <vector>

#include "core/error.h"

namespace parla::metrics {

// Throws DataError unless every reference stream has exactly one segment per hypothesis.
inline void check_reference_streams(const std::vector<std::vector<std::string>>& streams, std::size_t hyps) {
  for (std::size_t r = 0; r < streams.size(); ++r) {
    if (streams[r].size() != hyps)
      throw DataError("reference stream " + std::to_string(r + 1) + " has " + std::to_string(streams[r].size()) +
                      " segments, the hypotheses " + std::to_string(hyps));
  }
}

}  // namespace parla::metrics

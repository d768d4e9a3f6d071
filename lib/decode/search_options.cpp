#include "decode/search_options.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace parla::decode {

int64_t max_output_length(const SearchOptions& o, int64_t source_tokens, int64_t max_positions) {
  double n = std::floor(o.max_length_factor * static_cast<double>(source_tokens) + o.max_length_offset);
  int64_t len = n >= 1e15 ? std::numeric_limits<int64_t>::max() / 2 : static_cast<int64_t>(n);
  if (max_positions > 1 && max_positions != std::numeric_limits<int64_t>::max())
    len = std::min(len, max_positions - 1);
  return std::max<int64_t>(len, 1);
}

}  // namespace parla::decode

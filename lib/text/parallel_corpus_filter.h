#pragma once
// The pair filters of parla-preprocess (data.clean): every pair of a line-aligned corpus is either kept,
// cleaned, or dropped for exactly one reason, and every reason is counted for the report (stats.json).
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/config/data_config.h"
#include "text/line_cleaner.h"

namespace parla::text {

// Why a pair was dropped, in the order the checks run (the first that applies is counted).
enum class DropReason : int {
  kInvalidUtf8 = 0,   // either side is not valid UTF-8
  kMarkup,            // either side is a Europarl markup line
  kEmpty,             // either side is empty after cleaning
  kTooLong,           // either side has more than max_tokens tokens
  kLengthRatio,       // the token-length ratio exceeds max_length_ratio
  kIdentical,         // source == target
  kDuplicate,         // an earlier pair was identical
  kCount
};
const char* drop_reason_name(DropReason r);

// Counts of one input corpus (e.g. the training files), for stats.json and the stderr summary.
struct FilterStats {
  uint64_t read = 0, kept = 0;
  std::array<uint64_t, static_cast<size_t>(DropReason::kCount)> dropped{};
  uint64_t edited_unicode = 0, edited_control = 0, edited_whitespace = 0;  // lines (both sides) changed

  uint64_t dropped_total() const;
  nlohmann::json to_json() const;
};

// Which filters apply: the full set for training data; held-out sets given as separate files keep every
// usable pair (only invalid UTF-8, markup and empty sides are dropped), so their references stay complete.
enum class FilterScope { kTraining, kHeldOut };

class ParallelCorpusFilter {
 public:
  ParallelCorpusFilter(const CleanConfig& config, FilterScope scope = FilterScope::kTraining);

  // Cleans and checks one pair. Returns true and fills `src_out`/`tgt_out` when the pair is kept; counts it
  // either way. Duplicates are detected with a 64-bit hash per kept pair (the only memory that grows with the
  // corpus: ~2M pairs need ~100 MB; a false duplicate needs a hash collision, p ~ n^2 / 2^65).
  bool accept(std::string_view src, std::string_view tgt, std::string& src_out, std::string& tgt_out);
  // The reason of the last rejected pair (valid after accept() returned false).
  DropReason last_reason() const { return last_reason_; }

  const FilterStats& stats() const { return stats_; }

 private:
  bool drop(DropReason r);

  CleanConfig config_;
  FilterScope scope_;
  LineCleaner cleaner_;
  FilterStats stats_;
  std::unordered_set<uint64_t> seen_;
  DropReason last_reason_ = DropReason::kCount;
};

// 64-bit hash of a pair (FNV-1a over src, a separator byte that cannot occur in UTF-8, and tgt, then a
// SplitMix64 finaliser); stable across runs and platforms so duplicate removal is deterministic.
uint64_t pair_hash(std::string_view src, std::string_view tgt);

}  // namespace parla::text

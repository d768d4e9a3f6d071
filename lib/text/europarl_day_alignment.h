#pragma once
// Aligns one day of Europarl's source release (text/europarl_day.h) in two languages into sentence pairs, the step
// Koehn (2005) did with Perl scripts outside any toolkit:
//   1. anchor on the markup: chapters are matched by ID, then the speeches of a matched chapter by ID, then the
//      paragraphs of a matched speech one to one when both sides have as many. Where the tags differ (a chapter or
//      speech on one side only, IDs out of order, a different paragraph count), the text between the two nearest
//      matched anchors becomes one block: resynchronised, not dropped;
//   2. split each text line of a block into sentences (text/sentence_splitter.h, per language);
//   3. align the sentences of each block with Gale & Church's (1993) length-based programme
//      (text/gale_church.h, banded, so a day without any markup is one long block in bounded memory).
// 1-0 and 0-1 beads are left out of the pairs (counted); a block with one side empty, or more than half of its
// sentences unaligned, is not parallel text and is dropped (counted).
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/gale_church.h"
#include "text/sentence_splitter.h"

namespace parla::text {

struct EuroparlDay;

struct DayAlignmentStats {
  uint64_t chapters_matched = 0, chapters_only_src = 0, chapters_only_tgt = 0;
  uint64_t speeches_matched = 0, speeches_only_src = 0, speeches_only_tgt = 0;
  uint64_t paragraph_count_mismatches = 0;  // matched speeches aligned as one block for that reason
  uint64_t blocks = 0, blocks_dropped = 0;
  uint64_t src_sentences = 0, tgt_sentences = 0;
  uint64_t dropped_src_sentences = 0, dropped_tgt_sentences = 0;  // in dropped blocks
  std::array<uint64_t, 6> beads{};  // by BeadKind
  uint64_t pairs = 0;
  // Where the two sides' tags first differ (1-based lines of each side's first unmatched item; 0 when in step).
  uint64_t first_resync_src_line = 0, first_resync_tgt_line = 0;

  bool resynchronised() const {
    return chapters_only_src + chapters_only_tgt + speeches_only_src + speeches_only_tgt +
               paragraph_count_mismatches > 0;
  }
  void add(const DayAlignmentStats& other);
};

struct SentencePair {
  std::string src, tgt;
};

// The indices (i, j) of a[i] == b[j] kept by a monotone matching of two key sequences: equal keys in step are
// paired; at a difference the side whose key reappears sooner on the other side is skipped. Linear up to the
// logarithm of a key's repeats; keys may repeat (a day in parts restarts its chapter numbers).
std::vector<std::pair<size_t, size_t>> match_keys(const std::vector<std::string>& a, const std::vector<std::string>& b);

class EuroparlDayAligner {
 public:
  // split_lines = false takes every text line as one sentence (a release already split, one sentence a line).
  EuroparlDayAligner(std::string_view src_lang, std::string_view tgt_lang, GaleChurchOptions options = {},
                     bool split_lines = true);
  // Appends the day's sentence pairs to `out`, in document order.
  DayAlignmentStats align(const EuroparlDay& src, const EuroparlDay& tgt, std::vector<SentencePair>& out) const;

 private:
  SentenceSplitter src_splitter_, tgt_splitter_;
  GaleChurchOptions options_;
  bool split_lines_;
};

}  // namespace parla::text

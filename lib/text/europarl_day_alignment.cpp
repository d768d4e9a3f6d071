#include "text/europarl_day_alignment.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

#include "text/europarl_day.h"

namespace parla::text {

namespace {

// Code points: Gale & Church count characters, and a byte count would make Greek twice as long as English.
int length_in_characters(const std::string& s) {
  int n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// A block of text lines on each side that must align with each other (between two anchors).
struct Block {
  std::vector<const std::string*> src, tgt;
  bool empty() const { return src.empty() && tgt.empty(); }
};

void add_lines(const EuroparlParagraph& p, std::vector<const std::string*>& out) {
  for (const auto& line : p.lines) out.push_back(&line);
}
void add_lines(const EuroparlSpeech& s, std::vector<const std::string*>& out) {
  for (const auto& p : s.paragraphs) add_lines(p, out);
}
void add_lines(const EuroparlChapter& c, std::vector<const std::string*>& out) {
  for (const auto& s : c.speeches) add_lines(s, out);
}

template <class T>
std::vector<std::string> ids(const std::vector<T>& items) {
  std::vector<std::string> out;
  out.reserve(items.size());
  for (const auto& item : items) out.push_back(item.id);
  return out;
}

// Walks two item lists (chapters or speeches) along their matched IDs: the items between two matches go into
// one resynchronising block, and each matched pair goes to `matched`.
template <class T, class Matched>
void walk_anchors(const std::vector<T>& a, const std::vector<T>& b, uint64_t& only_a, uint64_t& only_b,
                  DayAlignmentStats& stats, std::vector<Block>& blocks, Matched matched) {
  auto matches = match_keys(ids(a), ids(b));
  matches.emplace_back(a.size(), b.size());  // the end, as a last anchor
  size_t i0 = 0, j0 = 0;
  for (auto [i, j] : matches) {
    if (i > i0 || j > j0) {
      only_a += i - i0;
      only_b += j - j0;
      if (stats.first_resync_src_line == 0 && stats.first_resync_tgt_line == 0) {
        stats.first_resync_src_line = i > i0 ? a[i0].line : (i < a.size() ? a[i].line : 0);
        stats.first_resync_tgt_line = j > j0 ? b[j0].line : (j < b.size() ? b[j].line : 0);
      }
      Block gap;
      for (size_t k = i0; k < i; ++k) add_lines(a[k], gap.src);
      for (size_t k = j0; k < j; ++k) add_lines(b[k], gap.tgt);
      if (!gap.empty()) blocks.push_back(std::move(gap));
    }
    if (i == a.size()) break;
    matched(a[i], b[j]);
    i0 = i + 1;
    j0 = j + 1;
  }
}

}  // namespace

void DayAlignmentStats::add(const DayAlignmentStats& o) {
  chapters_matched += o.chapters_matched;
  chapters_only_src += o.chapters_only_src;
  chapters_only_tgt += o.chapters_only_tgt;
  speeches_matched += o.speeches_matched;
  speeches_only_src += o.speeches_only_src;
  speeches_only_tgt += o.speeches_only_tgt;
  paragraph_count_mismatches += o.paragraph_count_mismatches;
  blocks += o.blocks;
  blocks_dropped += o.blocks_dropped;
  src_sentences += o.src_sentences;
  tgt_sentences += o.tgt_sentences;
  dropped_src_sentences += o.dropped_src_sentences;
  dropped_tgt_sentences += o.dropped_tgt_sentences;
  for (size_t k = 0; k < beads.size(); ++k) beads[k] += o.beads[k];
  pairs += o.pairs;
  if (first_resync_src_line == 0 && first_resync_tgt_line == 0) {
    first_resync_src_line = o.first_resync_src_line;
    first_resync_tgt_line = o.first_resync_tgt_line;
  }
}

std::vector<std::pair<size_t, size_t>> match_keys(const std::vector<std::string>& a,
                                                  const std::vector<std::string>& b) {
  // Positions of every key on each side, ascending, to find "the next occurrence after k" by binary search.
  auto positions = [](const std::vector<std::string>& v) {
    std::unordered_map<std::string, std::vector<size_t>> at;
    for (size_t k = 0; k < v.size(); ++k) at[v[k]].push_back(k);
    return at;
  };
  auto in_a = positions(a), in_b = positions(b);
  auto next = [](const std::unordered_map<std::string, std::vector<size_t>>& at, const std::string& key,
                 size_t from) -> size_t {
    auto it = at.find(key);
    if (it == at.end()) return SIZE_MAX;
    auto p = std::lower_bound(it->second.begin(), it->second.end(), from);
    return p == it->second.end() ? SIZE_MAX : *p;
  };
  std::vector<std::pair<size_t, size_t>> out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] == b[j]) {
      out.emplace_back(i++, j++);
      continue;
    }
    size_t a_in_b = next(in_b, a[i], j), b_in_a = next(in_a, b[j], i);
    if (a_in_b == SIZE_MAX)
      ++i;  // a[i] has no counterpart ahead
    else if (b_in_a == SIZE_MAX)
      ++j;
    else if (a_in_b - j <= b_in_a - i)
      j = a_in_b;  // fewer items skipped on b's side to reach a[i]'s match
    else
      i = b_in_a;
  }
  return out;
}

EuroparlDayAligner::EuroparlDayAligner(std::string_view src_lang, std::string_view tgt_lang,
                                       GaleChurchOptions options, bool split_lines)
    : src_splitter_(src_lang), tgt_splitter_(tgt_lang), options_(options), split_lines_(split_lines) {}

DayAlignmentStats EuroparlDayAligner::align(const EuroparlDay& src, const EuroparlDay& tgt,
                                            std::vector<SentencePair>& out) const {
  DayAlignmentStats stats;
  std::vector<Block> blocks;
  walk_anchors(src.chapters, tgt.chapters, stats.chapters_only_src, stats.chapters_only_tgt, stats, blocks,
               [&](const EuroparlChapter& a, const EuroparlChapter& b) {
                 ++stats.chapters_matched;
                 walk_anchors(a.speeches, b.speeches, stats.speeches_only_src, stats.speeches_only_tgt, stats,
                              blocks, [&](const EuroparlSpeech& s, const EuroparlSpeech& t) {
                                ++stats.speeches_matched;
                                if (s.paragraphs.size() == t.paragraphs.size()) {
                                  for (size_t k = 0; k < s.paragraphs.size(); ++k) {
                                    Block block;
                                    add_lines(s.paragraphs[k], block.src);
                                    add_lines(t.paragraphs[k], block.tgt);
                                    blocks.push_back(std::move(block));
                                  }
                                  return;
                                }
                                ++stats.paragraph_count_mismatches;
                                if (stats.first_resync_src_line == 0 && stats.first_resync_tgt_line == 0) {
                                  stats.first_resync_src_line = s.line;
                                  stats.first_resync_tgt_line = t.line;
                                }
                                Block block;
                                add_lines(s, block.src);
                                add_lines(t, block.tgt);
                                blocks.push_back(std::move(block));
                              });
               });

  // Sentences of every block first: the day's character ratio is the c of Gale & Church's model (the paper
  // fixes c = 1 for its language pairs; French runs ~15% longer than English, Finnish shorter, so a day's own
  // ratio fits better than a constant).
  struct SplitBlock {
    std::vector<std::string> src, tgt;
    std::vector<int> src_len, tgt_len;
  };
  std::vector<SplitBlock> split(blocks.size());
  double src_chars = 0, tgt_chars = 0;
  for (size_t k = 0; k < blocks.size(); ++k) {
    for (auto [lines, splitter, out] : {std::tuple{&blocks[k].src, &src_splitter_, &split[k].src},
                                        std::tuple{&blocks[k].tgt, &tgt_splitter_, &split[k].tgt}})
      for (const std::string* line : *lines)
        if (split_lines_)
          splitter->split(*line, *out);
        else
          out->push_back(*line);
    for (const auto& s : split[k].src) src_chars += split[k].src_len.emplace_back(length_in_characters(s));
    for (const auto& s : split[k].tgt) tgt_chars += split[k].tgt_len.emplace_back(length_in_characters(s));
  }
  GaleChurchOptions options = options_;
  if (src_chars > 0 && tgt_chars > 0) options.c = std::clamp(tgt_chars / src_chars, 0.5, 2.0);

  for (auto& b : split) {
    if (b.src.empty() && b.tgt.empty()) continue;
    ++stats.blocks;
    stats.src_sentences += b.src.size();
    stats.tgt_sentences += b.tgt.size();
    auto drop = [&] {
      ++stats.blocks_dropped;
      stats.dropped_src_sentences += b.src.size();
      stats.dropped_tgt_sentences += b.tgt.size();
    };
    if (b.src.empty() || b.tgt.empty()) {
      drop();
      continue;
    }
    GaleChurchResult result = gale_church_align(b.src_len, b.tgt_len, options);
    size_t unaligned = 0;
    for (const Bead& bead : result.beads)
      if (bead.src_count == 0 || bead.tgt_count == 0) unaligned += bead.src_count + bead.tgt_count;
    if (2 * unaligned > b.src.size() + b.tgt.size()) {
      drop();
      continue;
    }
    for (const Bead& bead : result.beads) {
      ++stats.beads[static_cast<size_t>(bead.kind)];
      if (bead.src_count == 0 || bead.tgt_count == 0) continue;
      SentencePair pair;
      for (int k = 0; k < bead.src_count; ++k) (k ? pair.src += ' ' : pair.src) += b.src[bead.src_begin + k];
      for (int k = 0; k < bead.tgt_count; ++k) (k ? pair.tgt += ' ' : pair.tgt) += b.tgt[bead.tgt_begin + k];
      out.push_back(std::move(pair));
      ++stats.pairs;
    }
  }
  return stats;
}

}  // namespace parla::text

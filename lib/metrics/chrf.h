#pragma once
// chrF (Popović, 2015, "chrF: character n-gram F-score for automatic MT evaluation") as sacreBLEU 2.6.0's CHRF
// computes it (sacrebleu/metrics/chrf.py) with its chrF2 defaults: character n-grams up to 6, no word n-grams,
// beta = 2, whitespace removed, and sacreBLEU's effective-order averaging (eps_smoothing off).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace parla::metrics {

struct ChrfOptions {
  int char_order = 6;          // character n-gram order (1..6 here)
  int beta = 2;                // recall is beta times as important as precision
  bool lowercase = false;      // Python str.lower() first
  bool whitespace = false;     // keep whitespace inside character n-grams
  bool eps_smoothing = false;  // chrF++.py/NLTK/Moses epsilon smoothing instead of effective order
};

// Per order n = 1..char_order: [hypothesis n-grams, reference n-grams, matches], flattened; summed over a corpus.
using ChrfStats = std::vector<int64_t>;

// sacreBLEU's CHRF._compute_f_score: the score in [0, 100].
double chrf_score(const ChrfStats& stats, const ChrfOptions& o);

// Computes segment statistics; with several references, those of the reference with the best segment F-score
// (first one on ties), as sacreBLEU. One per thread: it reuses its buffers.
class ChrfStatsCounter {
 public:
  explicit ChrfStatsCounter(ChrfOptions o);
  // `hyp` and `refs` are the raw (rstripped) lines.
  void segment(std::string_view hyp, const std::vector<std::string_view>& refs, ChrfStats& out);

 private:
  using Key = unsigned __int128;
  void prepare(std::string_view line, std::u32string& chars);
  ChrfOptions o_;
  std::string lowered_;
  std::u32string hyp_chars_, ref_chars_;
  std::vector<std::vector<std::pair<Key, int64_t>>> hyp_ngrams_;  // per order: sorted unique n-grams, counts
  std::vector<Key> keys_;
  ChrfStats candidate_;
};

ChrfStats chrf_segment_stats(const ChrfOptions& o, std::string_view hyp, const std::vector<std::string>& refs);

// sacreBLEU's API: CHRF().corpus_score(hyps, [ref_stream, ...]) and sentence_score(hyp, [ref, ...]).
double corpus_chrf(const ChrfOptions& o, const std::vector<std::string>& hyps,
                   const std::vector<std::vector<std::string>>& ref_streams);
double sentence_chrf(const ChrfOptions& o, const std::string& hyp, const std::vector<std::string>& refs);

// "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0"
std::string chrf_signature(const ChrfOptions& o, int nrefs, bool short_form = false);
// "chrF2"
std::string chrf_name(const ChrfOptions& o);

}  // namespace parla::metrics

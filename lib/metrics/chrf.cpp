#include "metrics/chrf.h"

#include <algorithm>

#include "core/error.h"
#include "metrics/bleu.h"
#include "metrics/reference_streams.h"
#include "text/unicode.h"

namespace parla::metrics {

double chrf_score(const ChrfStats& stats, const ChrfOptions& o) {
  const double eps = 1e-16;
  const int order = static_cast<int>(stats.size() / 3);
  const double factor = static_cast<double>(o.beta) * o.beta;
  double score = 0.0, avg_prec = 0.0, avg_rec = 0.0;
  int effective_order = 0;
  for (int i = 0; i < order; ++i) {
    int64_t n_hyp = stats[3 * i], n_ref = stats[3 * i + 1], n_match = stats[3 * i + 2];
    double prec = n_hyp > 0 ? static_cast<double>(n_match) / static_cast<double>(n_hyp) : eps;
    double rec = n_ref > 0 ? static_cast<double>(n_match) / static_cast<double>(n_ref) : eps;
    double denom = factor * prec + rec;
    score += denom > 0 ? ((1 + factor) * prec * rec / denom) : eps;
    // sacreBLEU < 2.0 style effective order: average only over orders both sides have.
    if (n_hyp > 0 && n_ref > 0) {
      avg_prec += prec;
      avg_rec += rec;
      ++effective_order;
    }
  }
  if (o.eps_smoothing) return 100 * score / order;
  if (effective_order == 0) {
    avg_prec = avg_rec = 0.0;
  } else {
    avg_prec /= effective_order;
    avg_rec /= effective_order;
  }
  if (avg_prec + avg_rec != 0.0) {
    score = (1 + factor) * avg_prec * avg_rec;
    score /= (factor * avg_prec) + avg_rec;
    return 100 * score;
  }
  return 0.0;
}

ChrfStatsCounter::ChrfStatsCounter(ChrfOptions o) : o_(o) {
  if (o_.char_order < 1 || o_.char_order > 6)
    throw UsageError("chrF character order must be between 1 and 6, got " + std::to_string(o_.char_order));
  hyp_ngrams_.resize(o_.char_order);
}

void ChrfStatsCounter::prepare(std::string_view line, std::u32string& chars) {
  if (o_.lowercase) {
    text::lower(line, lowered_);
    line = lowered_;
  }
  chars.clear();
  for (std::size_t i = 0; i < line.size();) {
    char32_t c = text::decode_utf8(line, i);
    // ''.join(line.split()) drops every whitespace code point.
    if (!o_.whitespace && text::is_space(c)) continue;
    chars += c;
  }
}

void ChrfStatsCounter::segment(std::string_view hyp, const std::vector<std::string_view>& refs, ChrfStats& out) {
  const int order = o_.char_order;
  prepare(hyp, hyp_chars_);
  // Code points are 21 bits, so up to six of them pack exactly into 128 bits.
  auto make_keys = [&](const std::u32string& s, int n, std::vector<Key>& keys) {
    keys.clear();
    if (s.size() < static_cast<std::size_t>(n)) return;
    for (std::size_t i = 0; i + n <= s.size(); ++i) {
      Key k = 0;
      for (int j = 0; j < n; ++j) k = (k << 21) | s[i + j];
      keys.push_back(k);
    }
    std::sort(keys.begin(), keys.end());
  };
  for (int n = 1; n <= order; ++n) {
    make_keys(hyp_chars_, n, keys_);
    auto& uniq = hyp_ngrams_[n - 1];
    uniq.clear();
    for (Key k : keys_) {
      if (!uniq.empty() && uniq.back().first == k)
        ++uniq.back().second;
      else
        uniq.emplace_back(k, 1);
    }
  }
  out.assign(3 * order, 0);
  double best_f = -1.0;
  for (const auto& ref : refs) {
    prepare(ref, ref_chars_);
    candidate_.assign(3 * order, 0);
    for (int n = 1; n <= order; ++n) {
      make_keys(ref_chars_, n, keys_);
      const auto& uniq = hyp_ngrams_[n - 1];
      int64_t hyp_count = 0, match = 0;
      std::size_t b = 0;
      for (const auto& [k, c] : uniq) {
        hyp_count += c;
        while (b < keys_.size() && keys_[b] < k) ++b;
        int64_t rc = 0;
        while (b < keys_.size() && keys_[b] == k) ++rc, ++b;
        match += std::min(c, rc);
      }
      // sacreBLEU's _get_match_statistics: hypothesis n-grams count only if the reference has n-grams of order n.
      candidate_[3 * (n - 1)] = keys_.empty() ? 0 : hyp_count;
      candidate_[3 * (n - 1) + 1] = static_cast<int64_t>(keys_.size());
      candidate_[3 * (n - 1) + 2] = match;
    }
    double f = chrf_score(candidate_, o_);
    if (f > best_f) {
      best_f = f;
      out = candidate_;
    }
  }
}

ChrfStats chrf_segment_stats(const ChrfOptions& o, std::string_view hyp, const std::vector<std::string>& refs) {
  ChrfStatsCounter counter(o);
  std::vector<std::string_view> views(refs.begin(), refs.end());
  ChrfStats out;
  counter.segment(hyp, views, out);
  return out;
}

double corpus_chrf(const ChrfOptions& o, const std::vector<std::string>& hyps,
                   const std::vector<std::vector<std::string>>& ref_streams) {
  check_reference_streams(ref_streams, hyps.size());
  ChrfStatsCounter counter(o);
  ChrfStats total(3 * o.char_order, 0), seg;
  std::vector<std::string_view> refs(ref_streams.size());
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    for (std::size_t r = 0; r < ref_streams.size(); ++r) refs[r] = ref_streams[r][i];
    counter.segment(hyps[i], refs, seg);
    for (std::size_t k = 0; k < total.size(); ++k) total[k] += seg[k];
  }
  return chrf_score(total, o);
}

double sentence_chrf(const ChrfOptions& o, const std::string& hyp, const std::vector<std::string>& refs) {
  return chrf_score(chrf_segment_stats(o, hyp, refs), o);
}

std::string chrf_signature(const ChrfOptions& o, int nrefs, bool short_form) {
  // sacreBLEU's chrF reports eff:yes unless eps smoothing is on.
  std::string s = signature_head(nrefs, o.lowercase, !o.eps_smoothing, short_form);
  s += "|nc:" + std::to_string(o.char_order);
  s += "|nw:0";
  s += short_form ? "|s:" : "|space:";
  s += o.whitespace ? "yes" : "no";
  s += short_form ? "|v:" : "|version:";
  s += kSacrebleuVersion;
  return s;
}

std::string chrf_name(const ChrfOptions& o) { return "chrF" + std::to_string(o.beta); }

}  // namespace parla::metrics

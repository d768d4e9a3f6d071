#pragma once
// BLEU (Papineni et al., 2002) exactly as sacreBLEU 2.6.0 computes it (sacrebleu/metrics/bleu.py): per-segment
// sufficient statistics (hypothesis length, closest reference length, clipped n-gram matches and n-gram totals
// for n = 1..4), corpus statistics as their plain sums, and compute_bleu with sacreBLEU's smoothing methods
// (Chen & Cherry, 2014: exp = NIST "smoothing 3", floor = "smoothing 1", add-k = "smoothing 2") and effective order.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/tokenizer.h"
#include "core/config/choice.h"

namespace parla::metrics {

constexpr int kBleuMaxOrder = 4;
// The sacreBLEU release whose scoring rules are reproduced; signatures carry it so they compare equal.
inline constexpr const char* kSacrebleuVersion = "2.6.0";

enum class SmoothMethod { kExp, kFloor, kAddK, kNone };
// "exp", "floor", "add-k", "none"; throws UsageError otherwise.
SmoothMethod parse_smooth_method(const std::string& name);
const char* smooth_method_name(SmoothMethod m);

struct BleuOptions {
  TokenizerKind tokenize = TokenizerKind::k13a;  // -tok
  bool lowercase = false;                        // -lc: Python str.lower() before tokenizing
  SmoothMethod smooth_method = SmoothMethod::kExp;
  std::optional<double> smooth_value;  // -sv; unset = sacreBLEU's default (floor 0.1, add-k 1)
  bool effective_order = false;        // on in --sentence-level mode, as sacreBLEU's CLI
  bool force = false;                  // --force: silence the tokenized-input warning
  // The smoothing value compute_bleu uses: smooth_value or the method's default.
  double smooth_value_or_default() const;
};

// Sufficient statistics of one segment or, summed, of a corpus.
struct BleuStats {
  int64_t sys_len = 0;
  int64_t ref_len = 0;
  std::array<int64_t, kBleuMaxOrder> correct{};  // clipped matches of n-grams, n = 1..4
  std::array<int64_t, kBleuMaxOrder> total{};    // hypothesis n-grams
  BleuStats& operator+=(const BleuStats& o);
};

struct BleuScore {
  double score = 0.0;
  // As sacreBLEU reports them: with add-k, counts and totals for n > 1 include the +k.
  std::array<double, kBleuMaxOrder> counts{}, totals{};
  std::array<double, kBleuMaxOrder> precisions{};  // percent
  double bp = 0.0;
  int64_t sys_len = 0, ref_len = 0;
  double ratio = 0.0;  // sys_len / ref_len, 0 when ref_len == 0
};

// sacreBLEU's BLEU.compute_bleu, step for step (the order of floating-point operations included).
BleuScore compute_bleu(const BleuStats& stats, SmoothMethod method, double smooth_value, bool effective_order);
inline BleuScore compute_bleu(const BleuStats& stats, const BleuOptions& o) {
  return compute_bleu(stats, o.smooth_method, o.smooth_value_or_default(), o.effective_order);
}

// Computes segment statistics from tokens. One per thread: it keeps its buffers between segments, so that no
// n-gram allocates. Tokens are interned per segment and n-grams compared as tuples of token ids (exact, no hashing).
class BleuStatsCounter {
 public:
  BleuStats segment(const std::vector<std::string_view>& hyp,
                    const std::vector<std::vector<std::string_view>>& refs);

 private:
  // Token ids of hyp then each reference, distinct strings -> distinct ids (open addressing over string_views).
  std::size_t intern(const std::vector<std::string_view>& hyp, const std::vector<std::vector<std::string_view>>& refs);
  template <typename Key, int kBits>
  void count(std::size_t hyp_len, const std::vector<std::vector<std::string_view>>& refs, BleuStats& st);

  std::vector<uint32_t> table_;
  std::vector<std::string_view> strings_;
  std::vector<uint32_t> ids_;
  std::vector<uint64_t> keys64_[2];
  std::vector<unsigned __int128> keys128_[2];
  std::vector<std::pair<unsigned __int128, int64_t>> hyp_unique_;
  std::vector<int64_t> max_ref_count_;
};

// One segment's preprocessing: optional lowercasing, then the tokenizer, then the whitespace split. The views in
// `tokens` point into `buffer`.
void bleu_tokens(const BleuOptions& o, std::string_view line, std::string& lowered, std::string& buffer,
                 std::vector<std::string_view>& tokens);

// Convenience for the API and tests: statistics of one segment from raw strings.
BleuStats bleu_segment_stats(const BleuOptions& o, std::string_view hyp, const std::vector<std::string>& refs);

// sacreBLEU's API: BLEU().corpus_score(hyps, [ref_stream, ...]) and sentence_score(hyp, [ref, ...]). Every reference
// stream must have one line per hypothesis. (sentence_score does not switch on effective order by itself.)
BleuScore corpus_bleu(const BleuOptions& o, const std::vector<std::string>& hyps,
                      const std::vector<std::vector<std::string>>& ref_streams);
BleuScore sentence_bleu(const BleuOptions& o, const std::string& hyp, const std::vector<std::string>& refs);

// "nrefs:N|case:mixed|eff:no" (or the --short form "#:N|c:mixed|e:no"): the head every metric's signature shares.
std::string signature_head(int nrefs, bool lowercase, bool effective, bool short_form);
// "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0" (short: "#:1|c:mixed|e:no|tok:13a|s:exp|v:2.6.0").
std::string bleu_signature(const BleuOptions& o, int nrefs, bool short_form = false);
// "92.8/83.3/74.7/67.0 (BP = 1.000 ratio = 1.003 hyp_len = 2627 ref_len = 2618)"
std::string bleu_verbose(const BleuScore& s);

}  // namespace parla::metrics

PARLA_CHOICES(parla::metrics::SmoothMethod, {parla::metrics::SmoothMethod::kExp, "exp"},
              {parla::metrics::SmoothMethod::kFloor, "floor"}, {parla::metrics::SmoothMethod::kAddK, "add-k"},
              {parla::metrics::SmoothMethod::kNone, "none"});

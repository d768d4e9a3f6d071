#include "metrics/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <type_traits>

#include "core/error.h"
#include "metrics/reference_streams.h"
#include "text/unicode.h"

namespace parla::metrics {

SmoothMethod parse_smooth_method(const std::string& name) {
  SmoothMethod m{};
  if (!config::parse_choice(name, m))
    throw UsageError("unknown smoothing method '" + name + "' (choose from " + config::names_joined<SmoothMethod>() + ")");
  return m;
}

const char* smooth_method_name(SmoothMethod m) { return config::name_of(m); }

double BleuOptions::smooth_value_or_default() const {
  if (smooth_value) return *smooth_value;
  // sacreBLEU's BLEU.SMOOTH_DEFAULTS
  if (smooth_method == SmoothMethod::kFloor) return 0.1;
  if (smooth_method == SmoothMethod::kAddK) return 1.0;
  return 0.0;
}

BleuStats& BleuStats::operator+=(const BleuStats& o) {
  sys_len += o.sys_len;
  ref_len += o.ref_len;
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    correct[n] += o.correct[n];
    total[n] += o.total[n];
  }
  return *this;
}

namespace {
// sacrebleu.utils.my_log: log with log(0) floored to -9999999999.
double my_log(double x) { return x == 0.0 ? -9999999999.0 : std::log(x); }
}  // namespace

BleuScore compute_bleu(const BleuStats& stats, SmoothMethod method, double smooth_value, bool effective_order) {
  BleuScore r;
  r.sys_len = stats.sys_len;
  r.ref_len = stats.ref_len;
  r.ratio = stats.ref_len ? static_cast<double>(stats.sys_len) / static_cast<double>(stats.ref_len) : 0.0;
  std::array<double, kBleuMaxOrder> correct{}, total{};
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    correct[n] = static_cast<double>(stats.correct[n]);
    total[n] = static_cast<double>(stats.total[n]);
  }
  // Brevity penalty (Papineni et al., 2002, eq. 1).
  if (stats.sys_len < stats.ref_len)
    r.bp = stats.sys_len > 0
               ? std::exp(1.0 - static_cast<double>(stats.ref_len) / static_cast<double>(stats.sys_len))
               : 0.0;
  else
    r.bp = 1.0;

  bool any_correct = std::any_of(stats.correct.begin(), stats.correct.end(), [](int64_t c) { return c != 0; });
  if (!any_correct) {
    // sacreBLEU's early exit (issue #141): no matches, score 0 before any smoothing.
    r.counts = correct;
    r.totals = total;
    return r;
  }
  double smooth_mteval = 1.0;
  int eff_order = kBleuMaxOrder;
  for (int n = 1; n <= kBleuMaxOrder; ++n) {
    if (method == SmoothMethod::kAddK && n > 1) {
      correct[n - 1] += smooth_value;
      total[n - 1] += smooth_value;
    }
    if (total[n - 1] == 0) break;
    if (effective_order) eff_order = n;
    if (correct[n - 1] == 0) {
      if (method == SmoothMethod::kExp) {
        smooth_mteval *= 2;
        r.precisions[n - 1] = 100.0 / (smooth_mteval * total[n - 1]);
      } else if (method == SmoothMethod::kFloor) {
        r.precisions[n - 1] = 100.0 * smooth_value / total[n - 1];
      }
    } else {
      r.precisions[n - 1] = 100.0 * correct[n - 1] / total[n - 1];
    }
  }
  double sum = 0.0;
  for (int n = 0; n < eff_order; ++n) sum += my_log(r.precisions[n]);
  r.score = r.bp * std::exp(sum / eff_order);
  r.counts = correct;
  r.totals = total;
  return r;
}

std::size_t BleuStatsCounter::intern(const std::vector<std::string_view>& hyp,
                                     const std::vector<std::vector<std::string_view>>& refs) {
  std::size_t n = hyp.size();
  for (const auto& r : refs) n += r.size();
  std::size_t size = 16;
  while (size < 2 * n) size <<= 1;
  table_.assign(size, 0);
  strings_.clear();
  ids_.clear();
  const std::size_t mask = size - 1;
  auto add = [&](std::string_view t) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (char c : t) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    std::size_t slot = (h ^ (h >> 29)) & mask;
    while (true) {
      uint32_t v = table_[slot];
      if (v == 0) {
        strings_.push_back(t);
        table_[slot] = static_cast<uint32_t>(strings_.size());
        ids_.push_back(static_cast<uint32_t>(strings_.size()));
        return;
      }
      if (strings_[v - 1] == t) {
        ids_.push_back(v);
        return;
      }
      slot = (slot + 1) & mask;
    }
  };
  for (const auto& t : hyp) add(t);
  for (const auto& r : refs)
    for (const auto& t : r) add(t);
  return strings_.size();
}

// Counts n-grams as sorted arrays of keys that pack the n token ids (ids start at 1, kBits bits each).
template <typename Key, int kBits>
void BleuStatsCounter::count(std::size_t hyp_len, const std::vector<std::vector<std::string_view>>& refs,
                             BleuStats& st) {
  std::vector<Key>* keys;
  if constexpr (std::is_same_v<Key, uint64_t>)
    keys = keys64_;
  else
    keys = keys128_;
  auto make_keys = [&](std::size_t offset, std::size_t len, int n, std::vector<Key>& out) {
    out.clear();
    for (std::size_t i = 0; i + n <= len; ++i) {
      Key k = 0;
      for (int j = 0; j < n; ++j) k = (k << kBits) | ids_[offset + i + j];
      out.push_back(k);
    }
    std::sort(out.begin(), out.end());
  };
  for (int n = 1; n <= kBleuMaxOrder; ++n) {
    std::vector<Key>& hk = keys[0];
    make_keys(0, hyp_len, n, hk);
    if (hk.empty()) break;
    st.total[n - 1] = static_cast<int64_t>(hk.size());
    hyp_unique_.clear();
    for (Key k : hk) {
      if (!hyp_unique_.empty() && hyp_unique_.back().first == k)
        ++hyp_unique_.back().second;
      else
        hyp_unique_.emplace_back(k, 1);
    }
    // Clipping uses the maximum count over the references (sacreBLEU's Counter union), not the sum.
    max_ref_count_.assign(hyp_unique_.size(), 0);
    std::size_t offset = hyp_len;
    for (const auto& r : refs) {
      std::vector<Key>& rk = keys[1];
      make_keys(offset, r.size(), n, rk);
      offset += r.size();
      std::size_t a = 0, b = 0;
      while (a < hyp_unique_.size() && b < rk.size()) {
        Key hkey = static_cast<Key>(hyp_unique_[a].first);
        if (hkey < rk[b]) {
          ++a;
        } else if (rk[b] < hkey) {
          ++b;
        } else {
          int64_t c = 0;
          while (b < rk.size() && rk[b] == hkey) ++c, ++b;
          max_ref_count_[a] = std::max(max_ref_count_[a], c);
          ++a;
        }
      }
    }
    int64_t correct = 0;
    for (std::size_t a = 0; a < hyp_unique_.size(); ++a)
      correct += std::min(hyp_unique_[a].second, max_ref_count_[a]);
    st.correct[n - 1] = correct;
  }
}

BleuStats BleuStatsCounter::segment(const std::vector<std::string_view>& hyp,
                                    const std::vector<std::vector<std::string_view>>& refs) {
  BleuStats st;
  st.sys_len = static_cast<int64_t>(hyp.size());
  // Closest reference length; a tie goes to the shorter reference (sacreBLEU's _get_closest_ref_len).
  int64_t closest_diff = -1, closest_len = -1;
  for (const auto& r : refs) {
    int64_t len = static_cast<int64_t>(r.size());
    int64_t diff = std::llabs(st.sys_len - len);
    if (closest_diff == -1 || diff < closest_diff) {
      closest_diff = diff;
      closest_len = len;
    } else if (diff == closest_diff) {
      closest_len = std::min(closest_len, len);
    }
  }
  st.ref_len = closest_len < 0 ? 0 : closest_len;
  if (hyp.empty()) return st;
  // Exact n-gram identity through token ids: 16-bit ids pack four to a 64-bit key; larger segments use 128 bits.
  if (intern(hyp, refs) < 0xFFFF)
    count<uint64_t, 16>(hyp.size(), refs, st);
  else
    count<unsigned __int128, 32>(hyp.size(), refs, st);
  return st;
}

void bleu_tokens(const BleuOptions& o, std::string_view line, std::string& lowered, std::string& buffer,
                 std::vector<std::string_view>& tokens) {
  // sacreBLEU: tokenizer((line.lower() if lowercase else line).rstrip())
  if (o.lowercase) {
    text::lower(line, lowered);
    line = lowered;
  }
  tokenize(o.tokenize, text::rstrip(line), buffer);
  tokens.clear();
  text::split_whitespace(buffer, tokens);
}

BleuStats bleu_segment_stats(const BleuOptions& o, std::string_view hyp, const std::vector<std::string>& refs) {
  std::string lowered, hyp_buffer;
  std::vector<std::string_view> hyp_tokens;
  bleu_tokens(o, hyp, lowered, hyp_buffer, hyp_tokens);
  std::vector<std::string> ref_buffers(refs.size());
  std::vector<std::vector<std::string_view>> ref_tokens(refs.size());
  for (std::size_t i = 0; i < refs.size(); ++i) bleu_tokens(o, refs[i], lowered, ref_buffers[i], ref_tokens[i]);
  BleuStatsCounter counter;
  return counter.segment(hyp_tokens, ref_tokens);
}

BleuScore corpus_bleu(const BleuOptions& o, const std::vector<std::string>& hyps,
                      const std::vector<std::vector<std::string>>& ref_streams) {
  check_reference_streams(ref_streams, hyps.size());
  BleuStats total;
  std::vector<std::string> refs(ref_streams.size());
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    for (std::size_t r = 0; r < ref_streams.size(); ++r) refs[r] = ref_streams[r][i];
    total += bleu_segment_stats(o, hyps[i], refs);
  }
  return compute_bleu(total, o);
}

BleuScore sentence_bleu(const BleuOptions& o, const std::string& hyp, const std::vector<std::string>& refs) {
  return compute_bleu(bleu_segment_stats(o, hyp, refs), o);
}

std::string signature_head(int nrefs, bool lowercase, bool effective, bool short_form) {
  std::string s = short_form ? "#:" : "nrefs:";
  s += std::to_string(nrefs);
  s += short_form ? "|c:" : "|case:";
  s += lowercase ? "lc" : "mixed";
  s += short_form ? "|e:" : "|eff:";
  s += effective ? "yes" : "no";
  return s;
}

std::string bleu_signature(const BleuOptions& o, int nrefs, bool short_form) {
  std::string smooth = smooth_method_name(o.smooth_method);
  if (o.smooth_method == SmoothMethod::kFloor || o.smooth_method == SmoothMethod::kAddK) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "[%.2f]", o.smooth_value_or_default());
    smooth += buf;
  }
  std::string s = signature_head(nrefs, o.lowercase, o.effective_order, short_form);
  s += "|tok:";
  s += tokenizer_name(o.tokenize);
  s += short_form ? "|s:" : "|smooth:";
  s += smooth;
  s += short_form ? "|v:" : "|version:";
  s += kSacrebleuVersion;
  return s;
}

std::string bleu_verbose(const BleuScore& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)",
                s.precisions[0], s.precisions[1], s.precisions[2], s.precisions[3], s.bp, s.ratio,
                static_cast<long long>(s.sys_len), static_cast<long long>(s.ref_len));
  return buf;
}

}  // namespace parla::metrics

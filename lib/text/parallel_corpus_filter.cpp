#include "text/parallel_corpus_filter.h"

#include <algorithm>

#include "text/europarl_markup.h"

namespace parla::text {

const char* drop_reason_name(DropReason r) {
  switch (r) {
    case DropReason::kInvalidUtf8: return "invalid_utf8";
    case DropReason::kMarkup: return "markup";
    case DropReason::kEmpty: return "empty";
    case DropReason::kTooLong: return "too_long";
    case DropReason::kLengthRatio: return "length_ratio";
    case DropReason::kIdentical: return "identical";
    case DropReason::kDuplicate: return "duplicate";
    case DropReason::kCount: break;
  }
  return "?";
}

uint64_t FilterStats::dropped_total() const {
  uint64_t t = 0;
  for (auto n : dropped) t += n;
  return t;
}

nlohmann::json FilterStats::to_json() const {
  nlohmann::json d = nlohmann::json::object();
  for (size_t i = 0; i < dropped.size(); ++i) d[drop_reason_name(static_cast<DropReason>(i))] = dropped[i];
  return {{"pairs_read", read},
          {"pairs_kept", kept},
          {"pairs_dropped", dropped_total()},
          {"dropped", d},
          {"lines_edited", {{"unicode_normalization", edited_unicode},
                            {"control_characters", edited_control},
                            {"whitespace", edited_whitespace}}}};
}

uint64_t pair_hash(std::string_view src, std::string_view tgt) {
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](unsigned char c) {
    h ^= c;
    h *= 1099511628211ULL;
  };
  for (char c : src) mix(static_cast<unsigned char>(c));
  mix(0xFF);  // never a byte of valid UTF-8, so ("ab","c") and ("a","bc") differ
  for (char c : tgt) mix(static_cast<unsigned char>(c));
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

ParallelCorpusFilter::ParallelCorpusFilter(const CleanConfig& config, FilterScope scope)
    : config_(config), scope_(scope), cleaner_(config) {}

bool ParallelCorpusFilter::drop(DropReason r) {
  ++stats_.dropped[static_cast<size_t>(r)];
  last_reason_ = r;
  return false;
}

bool ParallelCorpusFilter::accept(std::string_view src, std::string_view tgt, std::string& src_out,
                                  std::string& tgt_out) {
  ++stats_.read;
  if (!is_valid_utf8(src) || !is_valid_utf8(tgt)) return drop(DropReason::kInvalidUtf8);
  if (config_.remove_markup && (is_europarl_markup(src) || is_europarl_markup(tgt))) return drop(DropReason::kMarkup);
  LineEdits es, et;
  cleaner_.clean(src, src_out, &es);
  cleaner_.clean(tgt, tgt_out, &et);
  stats_.edited_unicode += es.unicode + et.unicode;
  stats_.edited_control += es.control + et.control;
  stats_.edited_whitespace += es.whitespace + et.whitespace;
  bool src_empty = src_out.find_first_not_of(' ') == std::string::npos;
  bool tgt_empty = tgt_out.find_first_not_of(' ') == std::string::npos;
  if (config_.drop_empty && (src_empty || tgt_empty)) return drop(DropReason::kEmpty);
  if (scope_ == FilterScope::kTraining) {
    size_t ns = count_tokens(src_out), nt = count_tokens(tgt_out);
    if (config_.max_tokens > 0 && std::max(ns, nt) > static_cast<size_t>(config_.max_tokens))
      return drop(DropReason::kTooLong);
    // The ratio is undefined with an empty side; those pairs are drop_empty's business.
    if (config_.max_length_ratio > 0 && ns > 0 && nt > 0 &&
        static_cast<double>(std::max(ns, nt)) > config_.max_length_ratio * static_cast<double>(std::min(ns, nt)))
      return drop(DropReason::kLengthRatio);
    if (config_.drop_identical && src_out == tgt_out) return drop(DropReason::kIdentical);
    if (config_.drop_duplicates && !seen_.insert(pair_hash(src_out, tgt_out)).second)
      return drop(DropReason::kDuplicate);
  }
  ++stats_.kept;
  return true;
}

}  // namespace parla::text

#pragma once
// sacreBLEU 2.6.0's command-line output, byte for byte: the text line
//   BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = 34.56 67.1/45.2/30.1/21.0 (BP = ...)
// its JSON object (json.dumps(indent=1)), -b (score only), --short signatures, and the alignment of several
// metrics on '='. Python's format() rounds like glibc's printf, so "%.*f" gives the same digits.
#include <string>
#include <vector>

#include "metrics/corpus_scorer.h"
#include "core/config/choice.h"

namespace parla::metrics {

enum class OutputFormat { kText, kJson };
OutputFormat parse_output_format(const std::string& name);

struct ReportOptions {
  OutputFormat format = OutputFormat::kJson;  // sacreBLEU's default
  int width = 2;                              // -w: decimals of the score
  bool score_only = false;                    // -b
  bool short_signature = false;               // --short
};

// The corpus-level report for every requested metric (in sacreBLEU's order: sorted by name), without a final
// newline.
std::string render_corpus_report(const ScoreOptions& so, const CorpusStats& stats, const ReportOptions& ro);
// One segment's line in --sentence-level mode (always text; sacreBLEU ignores -f json there), for the first
// requested metric.
std::string render_segment_line(const ScoreOptions& so, int nrefs, const SegmentScores& seg, const ReportOptions& ro);

// parla's --stats: the sufficient statistics and derived values as one line of JSON, for checking against
// sacreBLEU's own numbers: {"bleu": {"counts", "totals", "counts_reported", "totals_reported", "precisions", "bp",
// "ratio", "sys_len", "ref_len", "score"}, "chrf": {"stats", "score"}} (keys only for the requested metrics).
std::string render_stats_json(const ScoreOptions& so, const BleuStats& bleu, const ChrfStats& chrf);

// Python's f"{x:.{width}f}".
std::string format_fixed(double x, int width);
// Python's repr(float(f"{x:.{width}f}")) as json.dumps writes it: "42.5", "100.0", "0.0".
std::string json_rounded_float(double x, int width);

}  // namespace parla::metrics

PARLA_CHOICES(parla::metrics::OutputFormat, {parla::metrics::OutputFormat::kText, "text"},
              {parla::metrics::OutputFormat::kJson, "json"});

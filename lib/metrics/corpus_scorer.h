#pragma once
// Scores a hypothesis file against reference files with BLEU and/or chrF, streaming: segments are read in
// batches, tokenized and counted on several threads, and only the summed sufficient statistics are kept, so
// memory does not grow with the corpus. This is the library behind parla-score-bleu.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "core/config/choice.h"

namespace parla::metrics {

enum class Metric { kBleu, kChrf };
// "bleu" or "chrf" (case-insensitive); throws UsageError otherwise.
Metric parse_metric(const std::string& name);

struct ScoreOptions {
  std::string hypothesis = "-";  // path, or "-" for standard input
  std::vector<std::string> references;
  std::vector<Metric> metrics{Metric::kBleu};  // in the order given (the first one is used at sentence level)
  BleuOptions bleu;
  ChrfOptions chrf;
  bool sentence_level = false;
  int threads = 0;                   // 0 = all cores
  std::size_t batch_segments = 16384;  // segments per batch read and scored in parallel
};

struct SegmentScores {
  BleuStats bleu;
  ChrfStats chrf;
};

struct CorpusStats {
  uint64_t segments = 0;
  int nrefs = 0;
  BleuStats bleu;
  ChrfStats chrf;
  // Hypothesis lines ending in " ." (sacreBLEU warns at 100 or more: probably tokenized input).
  uint64_t tokenized_period_lines = 0;
};

// Reads and scores the corpus. `on_segment`, when given, receives each segment's statistics in order (for
// sentence-level output). Throws DataError for unreadable, mismatched or invalid input; UsageError for bad options.
CorpusStats score_corpus(const ScoreOptions& o,
                         const std::function<void(uint64_t index, const SegmentScores&)>& on_segment = {});

}  // namespace parla::metrics

PARLA_CHOICES(parla::metrics::Metric, {parla::metrics::Metric::kBleu, "bleu"},
              {parla::metrics::Metric::kChrf, "chrf"});

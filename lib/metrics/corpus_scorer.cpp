#include "metrics/corpus_scorer.h"

#include <algorithm>
#include <thread>

#include "core/error.h"
#include "metrics/segment_reader.h"
#include "text/unicode.h"

namespace parla::metrics {

Metric parse_metric(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  Metric m{};
  if (!config::parse_choice(n, m))
    throw UsageError("unknown metric '" + name + "' (choose from " + config::names_joined<Metric>() + ")");
  return m;
}

namespace {

// Everything one worker thread reuses from segment to segment.
struct Worker {
  explicit Worker(const ScoreOptions& o) : chrf(o.chrf) {}
  BleuStatsCounter bleu;
  ChrfStatsCounter chrf;
  std::string lowered, hyp_buffer;
  std::vector<std::string> ref_buffers;
  std::vector<std::string_view> hyp_tokens;
  std::vector<std::vector<std::string_view>> ref_tokens;
  std::vector<std::string_view> ref_views;
};

void score_range(const ScoreOptions& o, bool want_bleu, bool want_chrf, const SegmentBatch& batch,
                 std::size_t begin, std::size_t end, Worker& w, std::vector<SegmentScores>& out) {
  const std::size_t nrefs = batch.refs.size();
  w.ref_buffers.resize(nrefs);
  w.ref_tokens.resize(nrefs);
  w.ref_views.resize(nrefs);
  for (std::size_t i = begin; i < end; ++i) {
    if (want_bleu) {
      bleu_tokens(o.bleu, batch.hyp[i], w.lowered, w.hyp_buffer, w.hyp_tokens);
      for (std::size_t r = 0; r < nrefs; ++r)
        bleu_tokens(o.bleu, batch.refs[r][i], w.lowered, w.ref_buffers[r], w.ref_tokens[r]);
      out[i].bleu = w.bleu.segment(w.hyp_tokens, w.ref_tokens);
    }
    if (want_chrf) {
      for (std::size_t r = 0; r < nrefs; ++r) w.ref_views[r] = batch.refs[r][i];
      w.chrf.segment(batch.hyp[i], w.ref_views, out[i].chrf);
    }
  }
}

}  // namespace

CorpusStats score_corpus(const ScoreOptions& o,
                         const std::function<void(uint64_t index, const SegmentScores&)>& on_segment) {
  const bool want_bleu = std::find(o.metrics.begin(), o.metrics.end(), Metric::kBleu) != o.metrics.end();
  const bool want_chrf = std::find(o.metrics.begin(), o.metrics.end(), Metric::kChrf) != o.metrics.end();
  if (!want_bleu && !want_chrf) throw UsageError("no metric selected");
  int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  ParallelSegmentReader reader(o.hypothesis, o.references);
  CorpusStats total;
  total.nrefs = static_cast<int>(reader.num_refs());
  total.chrf.assign(3 * o.chrf.char_order, 0);
  std::vector<Worker> workers;
  for (int t = 0; t < threads; ++t) workers.emplace_back(o);

  // Two batches: while the workers score one, this thread reads the next (reading is a good part of the work).
  SegmentBatch batches[2];
  std::vector<SegmentScores> scores;
  int current = 0;
  bool have = reader.next_batch(o.batch_segments, batches[current]);
  while (have) {
    const SegmentBatch& batch = batches[current];
    const std::size_t n = batch.size();
    scores.resize(n);
    std::vector<std::thread> pool;
    const std::size_t per = (n + threads - 1) / threads;
    for (int t = 0; t < threads; ++t) {
      std::size_t b = std::min(n, t * per), e = std::min(n, b + per);
      if (b >= e) break;
      pool.emplace_back([&, b, e, t] { score_range(o, want_bleu, want_chrf, batch, b, e, workers[t], scores); });
    }
    bool next_have = false;
    std::exception_ptr read_error;
    try {
      next_have = reader.next_batch(o.batch_segments, batches[1 - current]);
    } catch (...) {
      read_error = std::current_exception();
    }
    for (auto& th : pool) th.join();
    for (std::size_t i = 0; i < n; ++i) {
      if (batch.hyp[i].size() >= 2 && batch.hyp[i].compare(batch.hyp[i].size() - 2, 2, " .") == 0)
        ++total.tokenized_period_lines;
      if (want_bleu) total.bleu += scores[i].bleu;
      if (want_chrf)
        for (std::size_t k = 0; k < total.chrf.size(); ++k) total.chrf[k] += scores[i].chrf[k];
      if (on_segment) on_segment(total.segments, scores[i]);
      ++total.segments;
    }
    if (read_error) std::rethrow_exception(read_error);
    have = next_have;
    current = 1 - current;
  }
  return total;
}

}  // namespace parla::metrics

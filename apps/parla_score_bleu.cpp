// parla-score-bleu: a drop-in for the sacreBLEU 2.x command line (BLEU and chrF), reproducing sacreBLEU 2.6.0's
// scores, signatures and output byte for byte. Flags -> metrics::ScoreOptions -> metrics::score_corpus.
#include <algorithm>
#include <cstring>
#include <optional>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "core/app.h"
#include "core/error.h"
#include "metrics/corpus_scorer.h"
#include "metrics/score_report.h"

namespace {

// sacreBLEU (argparse) spells several short options with more than one letter; CLI11 only knows one-letter
// short options, so they are rewritten to their long names first.
std::vector<std::string> sacrebleu_aliases(int argc, char** argv) {
  static const std::pair<const char*, const char*> kAliases[] = {
      {"-tok", "--tokenize"},     {"-lc", "--lowercase"},        {"-sv", "--smooth-value"},
      {"-sl", "--sentence-level"}, {"-sh", "--short"},           {"-cc", "--chrf-char-order"},
  };
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    for (const auto& [from, to] : kAliases) {
      std::size_t n = std::strlen(from);
      if (a == from || (a.compare(0, n, from) == 0 && a.size() > n && a[n] == '=')) {
        a = to + a.substr(n);
        break;
      }
    }
    args.push_back(a);
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace parla;
  app::CommonFlags flags;
  flags.program = "parla-score-bleu";
  CLI::App cli{
      "parla-score-bleu: BLEU and chrF exactly as sacreBLEU 2.6.0 computes them (same scores, signatures and\n"
      "output; signatures say version:2.6.0, the sacreBLEU release whose rules are reproduced).\n"
      "  parla-score-bleu REF [REF ...] [-i HYP]     (the hypothesis is read from stdin without -i)\n"
      "Files are UTF-8, plain or .gz; each line is one segment (rstripped, empty lines kept).",
      "parla-score-bleu"};
  metrics::ScoreOptions so;
  metrics::ReportOptions ro;
  std::string hyp = "-", tokenize, smooth = "exp", format = "json", langpair;
  std::vector<std::string> metric_names{"bleu"};
  std::optional<double> smooth_value;
  bool stats = false;

  app::add_logging_flags(cli, flags, "-V,--version");
  cli.add_option("refs", so.references, "Reference file(s), one segment per line (several = multi-reference)")
      ->required();
  cli.add_option("-i,--input", hyp, "Hypothesis file (default: standard input)");
  cli.add_option("-m,--metrics", metric_names, "Metrics to compute: bleu, chrf (default: bleu)")
      ->check(CLI::IsMember({"bleu", "chrf"}, CLI::ignore_case));
  cli.add_option("--tokenize", tokenize,
                 "BLEU tokenizer (-tok): 13a (default), intl, char, zh, none; -l xx-zh defaults to zh");
  cli.add_option("-l,--language-pair", langpair,
                 "Source-target language pair, e.g. en-zh; only selects the default tokenizer, as sacreBLEU");
  cli.add_flag("--lowercase", so.bleu.lowercase, "BLEU: lowercase with Python's str.lower() (-lc)");
  cli.add_option("-s,--smooth-method", smooth, "BLEU smoothing: exp (default), floor, add-k, none");
  cli.add_option("--smooth-value", smooth_value, "BLEU smoothing value for floor (default 0.1) and add-k (default 1) (-sv)");
  cli.add_flag("--force", so.bleu.force, "Do not warn when the hypothesis looks tokenized (lines ending in ' .')");
  cli.add_flag("--sentence-level", so.sentence_level,
               "Score every segment on its own (-sl; BLEU uses effective order; the first metric of -m)");
  cli.add_option("--chrf-char-order", so.chrf.char_order, "chrF character n-gram order, 1..6 (-cc)")
      ->capture_default_str();
  cli.add_option("--chrf-beta", so.chrf.beta, "chrF beta (recall weight)")->capture_default_str();
  cli.add_flag("--chrf-whitespace", so.chrf.whitespace, "chrF: keep whitespace in character n-grams");
  cli.add_flag("--chrf-lowercase", so.chrf.lowercase, "chrF: lowercase first");
  cli.add_flag("--chrf-eps-smoothing", so.chrf.eps_smoothing,
               "chrF: epsilon smoothing (chrF++.py, NLTK, Moses) instead of effective order");
  cli.add_flag("-b,--score-only", ro.score_only, "Print only the score");
  cli.add_option("-w,--width", ro.width, "Decimals of the score")->capture_default_str()->check(CLI::Range(0, 30));
  cli.add_option("-f,--format", format, "Output format: json (default) or text (--sentence-level always prints text)")
      ->check(CLI::IsMember({"text", "json"}));
  cli.add_flag("--short", ro.short_signature, "Abbreviated signature (-sh), in text output");
  cli.add_flag("--stats", stats,
               "parla's own: print the sufficient statistics as JSON instead (BLEU counts, totals, counts/totals "
               "as reported after add-k, precisions, bp, ratio, sys_len, ref_len, score; chrF statistics and score); "
               "one object per line with --sentence-level");
  cli.add_option("-j,--threads", so.threads, "Worker threads (default: all cores)")->check(CLI::NonNegativeNumber);

  std::vector<std::string> args = sacrebleu_aliases(argc, argv);
  std::vector<char*> argv2;
  for (auto& a : args) argv2.push_back(a.data());

  return app::run(cli, flags, static_cast<int>(argv2.size()), argv2.data(), [&]() -> int {
    so.hypothesis = hyp;
    so.metrics.clear();
    for (const auto& m : metric_names) so.metrics.push_back(metrics::parse_metric(m));
    if (tokenize.empty()) {
      // sacreBLEU picks the default tokenizer from the target language of -l.
      std::string target = langpair.find('-') != std::string::npos ? langpair.substr(langpair.find('-') + 1) : "";
      if (target == "ja" || target == "ko")
        throw UsageError("-l " + langpair + ": sacreBLEU would use the " + target +
                         "-mecab tokenizer, which parla does not provide; pass -tok explicitly");
      tokenize = target == "zh" ? "zh" : "13a";
    }
    so.bleu.tokenize = metrics::parse_tokenizer(tokenize);
    so.bleu.smooth_method = metrics::parse_smooth_method(smooth);
    so.bleu.smooth_value = smooth_value;
    so.bleu.effective_order = so.sentence_level;
    ro.format = metrics::parse_output_format(format);

    if (so.sentence_level) {
      std::string out;
      metrics::score_corpus(so, [&](uint64_t, const metrics::SegmentScores& seg) {
        out += stats ? metrics::render_stats_json(so, seg.bleu, seg.chrf) : metrics::render_segment_line(so, static_cast<int>(so.references.size()), seg, ro);
        out += '\n';
      });
      std::cout << out << std::flush;
      return kExitOk;
    }
    metrics::CorpusStats st = metrics::score_corpus(so);
    bool bleu = std::find(so.metrics.begin(), so.metrics.end(), metrics::Metric::kBleu) != so.metrics.end();
    if (bleu && !so.bleu.force && st.tokenized_period_lines >= 100) {
      spdlog::warn("That's 100 lines that end in a tokenized period ('.')");
      spdlog::warn("It looks like you forgot to detokenize your test data, which may hurt your score.");
      spdlog::warn("If you insist your data is detokenized, or don't care, you can suppress this message with "
                   "the `force` parameter.");
    }
    if (bleu && st.bleu.sys_len == 0)
      spdlog::warn("the hypothesis '{}' has only empty lines: BLEU is 0", hyp == "-" ? "<stdin>" : hyp);
    if (stats)
      std::cout << metrics::render_stats_json(so, st.bleu, st.chrf) << std::endl;
    else
      std::cout << metrics::render_corpus_report(so, st, ro) << std::endl;
    return kExitOk;
  });
}

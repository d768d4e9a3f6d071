// Benchmark of parla-score-bleu's scorer: generates a deterministic 1,000,000-line hypothesis/reference pair
// (Zipf-distributed words, ~25 per line, punctuation; the hypothesis a perturbed copy of the reference), then
// scores it in-process (metrics::score_corpus) and through the executable, printing lines/s, wall time and peak
// RSS. With --ref FILE it scores a real corpus instead (the hypothesis is FILE perturbed the same way).
//   bench_score_bleu [--lines N] [--ref FILE] [--threads N] [--dir DIR] [--chrf]
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "metrics/corpus_scorer.h"
#include "metrics/score_report.h"
#include "metrics/segment_reader.h"

namespace {

double peak_rss_mb(int who) {
  rusage ru{};
  getrusage(who, &ru);
  return ru.ru_maxrss / 1024.0;  // Linux reports KiB
}

// Perturbs a line as a mediocre MT system would: drops, substitutes and swaps some words.
std::string perturb(const std::string& line, std::mt19937_64& rng, const std::vector<std::string>& vocab) {
  std::vector<std::string> words;
  std::size_t start = 0;
  while (start < line.size()) {
    std::size_t sp = line.find(' ', start);
    if (sp == std::string::npos) sp = line.size();
    if (sp > start) words.push_back(line.substr(start, sp - start));
    start = sp + 1;
  }
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < words.size(); ++i) {
    double x = u(rng);
    if (x < 0.08) continue;                                          // deletion
    if (x < 0.20) out.push_back(vocab[rng() % vocab.size()]);        // substitution
    else out.push_back(words[i]);
    if (x > 0.97 && out.size() >= 2) std::swap(out[out.size() - 1], out[out.size() - 2]);  // reordering
  }
  std::string s;
  for (std::size_t i = 0; i < out.size(); ++i) s += (i ? " " : "") + out[i];
  return s;
}

void generate(const std::string& ref_path, const std::string& hyp_path, uint64_t lines) {
  std::mt19937_64 rng(20261121);
  std::vector<std::string> vocab;
  const char* syll[] = {"ka", "ri", "to", "men", "sa", "lo", "ne", "vi", "tra", "der", "un", "po", "es", "li", "qu"};
  for (int i = 0; i < 30000; ++i) {
    std::string w;
    int n = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n; ++k) w += syll[rng() % 15];
    if (i % 50 == 0) w[0] = static_cast<char>(std::toupper(w[0]));
    vocab.push_back(w);
  }
  // Zipf(1) ranks through the inverse CDF of a harmonic table.
  std::vector<double> cdf(vocab.size());
  double acc = 0;
  for (std::size_t i = 0; i < vocab.size(); ++i) cdf[i] = (acc += 1.0 / (i + 1));
  std::uniform_real_distribution<double> u(0, acc);
  std::normal_distribution<double> len(25, 8);
  std::ofstream ref(ref_path), hyp(hyp_path);
  for (uint64_t l = 0; l < lines; ++l) {
    int n = std::max(1, static_cast<int>(len(rng)));
    std::string s;
    for (int i = 0; i < n; ++i) {
      std::size_t r = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
      s += (i ? " " : "") + vocab[std::min(r, vocab.size() - 1)];
      if (rng() % 12 == 0) s += ",";
      if (rng() % 40 == 0) s += " 19" + std::to_string(rng() % 100) + "-" + std::to_string(rng() % 10);
    }
    s += rng() % 5 ? "." : "?";
    ref << s << '\n';
    hyp << perturb(s, rng, vocab) << '\n';
  }
}

void perturb_file(const std::string& ref_path, const std::string& hyp_path) {
  std::mt19937_64 rng(7);
  std::vector<std::string> vocab = {"the", "of", "a", "European", "Commission", "Parliament", "that", "is"};
  parla::metrics::LineStream in(ref_path);
  std::ofstream hyp(hyp_path);
  std::string line;
  while (in.next(line)) hyp << perturb(line, rng, vocab) << '\n';
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t lines = 1000000;
  std::string ref, dir = std::filesystem::temp_directory_path().string();
  int threads = 0;
  bool chrf = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--lines" && i + 1 < argc) lines = std::stoull(argv[++i]);
    else if (a == "--ref" && i + 1 < argc) ref = argv[++i];
    else if (a == "--threads" && i + 1 < argc) threads = std::stoi(argv[++i]);
    else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--chrf") chrf = true;
    else {
      std::cerr << "usage: bench_score_bleu [--lines N] [--ref FILE] [--threads N] [--dir DIR] [--chrf]\n";
      return 2;
    }
  }
  std::string hyp;
  auto t0 = std::chrono::steady_clock::now();
  if (ref.empty()) {
    ref = dir + "/parla-bench-bleu-" + std::to_string(lines) + ".ref";
    hyp = dir + "/parla-bench-bleu-" + std::to_string(lines) + ".hyp";
    if (!std::filesystem::exists(hyp)) generate(ref, hyp, lines);
  } else {
    hyp = dir + "/parla-bench-bleu-" + std::filesystem::path(ref).filename().string() + ".perturbed";
    if (!std::filesystem::exists(hyp)) perturb_file(ref, hyp);
  }
  double prep = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("corpus: %s (reference), %s (hypothesis); prepared in %.1f s\n", ref.c_str(), hyp.c_str(), prep);

  parla::metrics::ScoreOptions o;
  o.hypothesis = hyp;
  o.references = {ref};
  o.threads = threads;
  if (chrf) o.metrics = {parla::metrics::Metric::kBleu, parla::metrics::Metric::kChrf};
  double rss_before = peak_rss_mb(RUSAGE_SELF);
  auto t1 = std::chrono::steady_clock::now();
  auto st = parla::metrics::score_corpus(o);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  parla::metrics::ReportOptions ro;
  ro.format = parla::metrics::OutputFormat::kText;
  std::printf("in-process: %llu lines in %.2f s = %.0f lines/s, peak RSS %.1f MB (%.1f MB before scoring)\n",
              static_cast<unsigned long long>(st.segments), secs, st.segments / secs, peak_rss_mb(RUSAGE_SELF),
              rss_before);
  std::printf("%s\n", parla::metrics::render_corpus_report(o, st, ro).c_str());

  // The executable, as a user runs it; its peak RSS comes from wait4's rusage.
  std::string exe = (std::filesystem::path(argv[0]).parent_path() / ".." / "bin" / "parla-score-bleu").string();
  if (!std::filesystem::exists(exe)) {
    std::printf("executable: %s not built, skipped\n", exe.c_str());
    return 0;
  }
  auto t2 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    std::vector<std::string> args = {exe, ref, "-i", hyp, "-b", "-q"};
    if (chrf) args.insert(args.end(), {"-m", "bleu", "chrf"});
    if (threads) args.insert(args.end(), {"-j", std::to_string(threads)});
    std::vector<char*> cargs;
    for (auto& s : args) cargs.push_back(s.data());
    cargs.push_back(nullptr);
    execv(exe.c_str(), cargs.data());
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  double esecs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t2).count();
  std::printf("executable: exit %d, %.2f s = %.0f lines/s, peak RSS %.1f MB\n", WEXITSTATUS(status), esecs,
              st.segments / esecs, ru.ru_maxrss / 1024.0);
  return 0;
}

// parla-preprocess --europarl-release: the aligner's quality against the release days of ../shared (already split
// and aligned line by line, so each paragraph's lines are joined back first) and its speed on those days
// replicated, with the ceilings of the same run (reading and decoding only; reading, decoding and splitting only).
// Usage: bench_europarl_release [RELEASE_DIR] [REPLICAS] [THREADS] [WORKDIR]
//   defaults: ../shared/data/europarl-raw-release-en-fr 100 2 /tmp/bench-europarl-release
// Quality: the splitter's errors (gold line boundaries missed, boundaries added), the aligner's errors on the gold
// sentences, and both together (precision and recall of the recovered pairs), per day and in all.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/logging.h"
#include "data/europarl_release.h"
#include "text/europarl_day.h"
#include "text/europarl_day_alignment.h"
#include "text/europarl_markup.h"
#include "text/legacy_encoding.h"
#include "text/line_reader.h"
#include "text/sentence_splitter.h"

namespace fs = std::filesystem;
using parla::text::SentencePair;

namespace {

std::vector<std::string> lines_of(const std::string& path) {
  parla::text::LineReader r(path);
  std::vector<std::string> out;
  std::string line;
  while (r.next(line)) out.push_back(line);
  return out;
}

// A paragraph: its gold sentences (the release's lines) and the tag lines kept as they are.
std::vector<std::string> join_paragraphs(const std::vector<std::string>& lines,
                                         std::vector<std::vector<std::string>>* paragraphs = nullptr) {
  std::vector<std::string> out;
  bool in_text = false;
  for (const auto& line : lines) {
    if (parla::text::is_europarl_markup(line)) {
      out.push_back(line);
      in_text = false;
      continue;
    }
    if (in_text) {
      out.back() += " " + line;
      if (paragraphs) paragraphs->back().push_back(line);
    } else {
      out.push_back(line);
      if (paragraphs) paragraphs->push_back({line});
      in_text = true;
    }
  }
  return out;
}

parla::text::EuroparlDay day_of(const std::vector<std::string>& lines) {
  parla::text::EuroparlDay day;
  parla::text::read_europarl_day(lines, day);
  return day;
}

struct Score {
  size_t found = 0, gold = 0, correct = 0;
  void add(const std::vector<SentencePair>& f, const std::vector<SentencePair>& g) {
    std::map<std::pair<std::string, std::string>, int> want;
    for (const auto& p : g) ++want[{p.src, p.tgt}];
    for (const auto& p : f) {
      auto it = want.find({p.src, p.tgt});
      if (it != want.end() && it->second > 0) {
        --it->second;
        ++correct;
      }
    }
    found += f.size();
    gold += g.size();
  }
  double precision() const { return found ? double(correct) / found : 0; }
  double recall() const { return gold ? double(correct) / gold : 0; }
};

// Sentence boundaries inside paragraphs: gold = between the release's lines, found = between the splitter's
// sentences, both as offsets into the joined paragraph.
struct Boundaries {
  size_t gold = 0, found = 0, correct = 0;
  void add(const std::vector<std::string>& gold_lines, const std::vector<std::string>& split) {
    auto offsets = [](const std::vector<std::string>& parts) {
      std::vector<size_t> at;
      size_t pos = 0;
      for (size_t k = 0; k + 1 < parts.size(); ++k) at.push_back(pos += parts[k].size() + 1);
      return at;
    };
    auto g = offsets(gold_lines), f = offsets(split);
    gold += g.size();
    found += f.size();
    for (size_t x : f) correct += std::binary_search(g.begin(), g.end(), x);
  }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string release = argc > 1 ? argv[1] : "../shared/data/europarl-raw-release-en-fr";
  int replicas = argc > 2 ? std::stoi(argv[2]) : 100, threads = argc > 3 ? std::stoi(argv[3]) : 2;
  std::string work = argc > 4 ? argv[4] : "/tmp/bench-europarl-release";
  parla::logging::setup("bench_europarl_release", "warn", false);
  const std::string S = "en", T = "fr";
  std::vector<std::string> days;
  for (const auto& e : fs::directory_iterator(release + "/" + S)) days.push_back(e.path().stem().string());
  std::sort(days.begin(), days.end());

  std::printf("== quality (%s, %zu days; reference: its own line alignment) ==\n", release.c_str(), days.size());
  std::printf("%-12s %6s | %-25s %-25s | %-17s | %-17s\n", "day", "pairs", "splitter en: recall prec",
              "splitter fr: recall prec", "aligner: P R", "end to end: P R");
  Score all_aligner, all_e2e;
  Boundaries all_split[2];
  parla::text::SentenceSplitter splitters[2] = {parla::text::SentenceSplitter(S), parla::text::SentenceSplitter(T)};
  fs::remove_all(work);
  for (const auto& day : days) {
    auto src = lines_of(release + "/" + S + "/" + day + ".txt"), tgt = lines_of(release + "/" + T + "/" + day + ".txt");
    std::vector<SentencePair> gold;
    for (size_t k = 0; k < src.size() && k < tgt.size(); ++k)
      if (!parla::text::is_europarl_markup(src[k]) && !src[k].empty()) gold.push_back({src[k], tgt[k]});
    Boundaries split[2];
    std::vector<std::string> joined[2];
    for (int s = 0; s < 2; ++s) {
      std::vector<std::vector<std::string>> paragraphs;
      joined[s] = join_paragraphs(s ? tgt : src, &paragraphs);
      for (const auto& p : paragraphs) {
        std::string text;
        for (const auto& l : p) text += (text.empty() ? "" : " ") + l;
        split[s].add(p, splitters[s].split(text));
      }
      all_split[s].gold += split[s].gold;
      all_split[s].found += split[s].found;
      all_split[s].correct += split[s].correct;
    }
    std::vector<SentencePair> aligned, end_to_end;
    parla::text::EuroparlDayAligner(S, T, {}, false).align(day_of(src), day_of(tgt), aligned);
    parla::text::EuroparlDayAligner(S, T).align(day_of(joined[0]), day_of(joined[1]), end_to_end);
    Score a, e;
    a.add(aligned, gold);
    e.add(end_to_end, gold);
    all_aligner.add(aligned, gold);
    all_e2e.add(end_to_end, gold);
    auto r = [](const Boundaries& b) { return b.gold ? double(b.correct) / b.gold : 1.0; };
    auto p = [](const Boundaries& b) { return b.found ? double(b.correct) / b.found : 1.0; };
    std::printf("%-12s %6zu | %12.4f %12.4f %12.4f %12.4f | %8.4f %8.4f | %8.4f %8.4f\n", day.c_str(), gold.size(),
                r(split[0]), p(split[0]), r(split[1]), p(split[1]), a.precision(), a.recall(), e.precision(),
                e.recall());
    // The joined day, for the speed runs below.
    for (int s = 0; s < 2; ++s) {
      fs::create_directories(work + "/one/" + (s ? T : S));
      std::ofstream out(work + "/one/" + (s ? T : S) + "/" + day + ".txt", std::ios::binary);
      for (const auto& l : joined[s]) out << l << '\n';
    }
  }
  std::printf("splitter en: %zu gold boundaries, %zu found, %zu correct (recall %.4f, precision %.4f)\n",
              all_split[0].gold, all_split[0].found, all_split[0].correct,
              double(all_split[0].correct) / all_split[0].gold, double(all_split[0].correct) / all_split[0].found);
  std::printf("splitter fr: %zu gold boundaries, %zu found, %zu correct (recall %.4f, precision %.4f)\n",
              all_split[1].gold, all_split[1].found, all_split[1].correct,
              double(all_split[1].correct) / all_split[1].gold, double(all_split[1].correct) / all_split[1].found);
  std::printf("aligner alone (gold sentences): %zu pairs found, %zu gold, %zu correct: precision %.4f recall %.4f\n",
              all_aligner.found, all_aligner.gold, all_aligner.correct, all_aligner.precision(), all_aligner.recall());
  std::printf("end to end (joined paragraphs): %zu pairs found, %zu gold, %zu correct: precision %.4f recall %.4f\n",
              all_e2e.found, all_e2e.gold, all_e2e.correct, all_e2e.precision(), all_e2e.recall());

  // Speed: the joined days replicated under distinct day names (YY = replica, MM = the day's index).
  std::printf("== speed (%d replicas of %zu days, %d threads) ==\n", replicas, days.size(), threads);
  uint64_t bytes = 0;
  for (int r = 0; r < replicas; ++r)
    for (size_t k = 0; k < days.size(); ++k)
      for (const auto& lang : {S, T}) {
        char name[32];
        std::snprintf(name, sizeof name, "ep-%02d-%02zu-%s.txt", r, k + 1, days[k].substr(9, 2).c_str());
        fs::create_directories(work + "/rep/" + lang);
        fs::copy_file(work + "/one/" + lang + "/" + days[k] + ".txt", work + "/rep/" + lang + "/" + name,
                      fs::copy_options::overwrite_existing);
        bytes += fs::file_size(work + "/rep/" + lang + "/" + name);
      }
  // Ceilings of the same run: reading and decoding every file; and that plus splitting every text line.
  auto t0 = std::chrono::steady_clock::now();
  uint64_t lines = 0, sentences = 0;
  for (const auto& lang : {S, T})
    for (const auto& e : fs::directory_iterator(work + "/rep/" + lang)) {
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      parla::text::TextDecoding d;
      lines += parla::text::decode_text_lines(ss.str(), d).size();
    }
  double read_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < 2; ++s)
    for (const auto& e : fs::directory_iterator(work + "/rep/" + (s ? T : S))) {
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      parla::text::TextDecoding d;
      std::vector<std::string> out;
      for (const auto& l : parla::text::decode_text_lines(ss.str(), d))
        if (!parla::text::is_europarl_markup(l)) splitters[s].split(l, out);
      sentences += out.size();
    }
  double split_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  auto result = parla::data::align_europarl_release({work + "/rep", S, T, threads}, work + "/out." + S,
                                                    work + "/out." + T);
  double align_s = seconds_since(t0);
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("input: %.1f MB, %llu lines, %llu sentences after splitting\n", bytes / 1e6,
              static_cast<unsigned long long>(lines), static_cast<unsigned long long>(sentences));
  std::printf("ceiling, read + decode (1 thread):          %6.2f s  %8.1f MB/s\n", read_s, bytes / 1e6 / read_s);
  std::printf("ceiling, read + decode + split (1 thread):  %6.2f s  %8.1f MB/s\n", split_s, bytes / 1e6 / split_s);
  std::printf("align_europarl_release (%d threads):         %6.2f s  %8.1f MB/s  %llu pairs  %.0f pairs/s\n",
              threads, align_s, bytes / 1e6 / align_s, static_cast<unsigned long long>(result.pairs),
              result.pairs / align_s);
  std::printf("peak_rss_mb %.0f\n", ru.ru_maxrss / 1024.0);
  return 0;
}

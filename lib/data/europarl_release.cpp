#include "data/europarl_release.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/progress.h"
#include "core/output_file.h"
#include "text/europarl_day.h"
#include "text/europarl_day_alignment.h"
#include "text/legacy_encoding.h"

namespace fs = std::filesystem;

namespace parla::data {

namespace {

using text::DayAlignmentStats;
using text::SentencePair;

// The files of one day in one language: the day file, its parts (by part number), or both.
struct DayFiles {
  std::string whole;
  std::map<int, std::string> parts;
};

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "ep-YY-MM-DD.txt" -> day "ep-YY-MM-DD", part -1; "ep-YY-MM-DD-NNN.txt" -> part NNN; anything else: nothing.
std::optional<std::pair<std::string, int>> parse_day_file_name(const std::string& name) {
  std::string_view n = name;
  if (n.size() < 15 || n.substr(0, 3) != "ep-" || n.substr(n.size() - 4) != ".txt") return std::nullopt;
  std::string_view stem = n.substr(0, n.size() - 4);
  std::string_view date = stem.substr(3, 8);
  if (!all_digits(date.substr(0, 2)) || date[2] != '-' || !all_digits(date.substr(3, 2)) || date[5] != '-' ||
      !all_digits(date.substr(6, 2)))
    return std::nullopt;
  std::string day(stem.substr(0, 11));
  if (stem.size() == 11) return std::pair{day, -1};
  std::string_view part = stem.substr(11);
  if (part[0] != '-' || !all_digits(part.substr(1)) || part.size() > 7) return std::nullopt;
  return std::pair{day, std::stoi(std::string(part.substr(1)))};
}

std::string language_folder(const std::string& dir, const std::string& lang) {
  for (fs::path p : {fs::path(dir) / lang, fs::path(dir) / "txt" / lang}) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) return p.string();
  }
  throw DataError("--europarl-release '" + dir + "' has no folder '" + lang + "' (nor 'txt/" + lang +
                  "'): it must hold one folder of day files ep-YY-MM-DD.txt per language");
}

std::map<std::string, DayFiles> scan_language(const std::string& folder, uint64_t& other_files) {
  std::map<std::string, DayFiles> days;
  std::error_code ec;
  fs::directory_iterator it(folder, ec), end;
  if (ec) throw DataError("cannot read the folder '" + folder + "': " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) throw DataError("cannot read the folder '" + folder + "': " + ec.message());
    std::string name = it->path().filename().string();
    auto parsed = parse_day_file_name(name);
    std::error_code type_ec;
    if (!parsed || !it->is_regular_file(type_ec)) {
      ++other_files;
      continue;
    }
    DayFiles& d = days[parsed->first];
    if (parsed->second < 0)
      d.whole = it->path().string();
    else
      d.parts[parsed->second] = it->path().string();
  }
  if (days.empty())
    throw DataError("no day files (ep-YY-MM-DD.txt) in '" + folder + "'" +
                    (other_files ? " (" + std::to_string(other_files) + " other entries)" : ""));
  return days;
}

// What one worker makes of one day; the writer logs `warnings` in day order, so the log does not depend on the
// thread count.
struct DayResult {
  std::vector<SentencePair> pairs;
  DayAlignmentStats stats;
  std::vector<std::string> warnings;
  text::TextDecoding src_decoding, tgt_decoding;
  bool src_parts = false, tgt_parts = false, beside_parts = false, empty = false, unreadable = false;
  bool done = false;
};

// The paths to read for a day: the day file when there is one (a day file beside its own parts is the whole day,
// the parts a copy of it split up), else its parts in order.
std::vector<std::string> day_paths(const DayFiles& files, bool& beside_parts) {
  beside_parts = !files.whole.empty() && !files.parts.empty();
  if (!files.whole.empty()) return {files.whole};
  std::vector<std::string> paths;
  for (const auto& [part, path] : files.parts) paths.push_back(path);
  return paths;
}

// Reads one language's side of a day; false (with a warning) when a file cannot be read.
bool read_side(const DayFiles& files, text::EuroparlDay& day, text::TextDecoding& decoding, DayResult& result) {
  bool beside = false;
  auto paths = day_paths(files, beside);
  if (beside)
    result.warnings.push_back("'" + files.whole + "' is next to " + std::to_string(files.parts.size()) +
                              " part file(s) of the same day: reading the day file, skipping the parts");
  result.beside_parts |= beside;
  uint64_t first_line = 1;
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream bytes;
    if (in) bytes << in.rdbuf();
    if (!in || in.bad()) {
      result.warnings.push_back("cannot read '" + path + "': skipping the day");
      return false;
    }
    text::TextDecoding file_decoding;
    std::string content = bytes.str();
    auto lines = text::decode_text_lines(content, file_decoding);
    if (file_decoding.converted_lines)
      result.warnings.push_back("'" + path + "': " + std::to_string(file_decoding.converted_lines) +
                                " line(s) are not UTF-8 (first: line " +
                                std::to_string(file_decoding.first_converted_line) + "); read as latin-1 (cp1252)");
    text::read_europarl_day(lines, day, first_line);
    first_line += lines.size();
    decoding.byte_order_mark |= file_decoding.byte_order_mark;
    decoding.lines += file_decoding.lines;
    decoding.crlf_lines += file_decoding.crlf_lines;
    decoding.converted_lines += file_decoding.converted_lines;
  }
  return true;
}

void align_day(const std::string& name, const DayFiles& src_files, const DayFiles& tgt_files,
               const text::EuroparlDayAligner& aligner, const EuroparlReleaseOptions& options, DayResult& result) {
  text::EuroparlDay src, tgt;
  result.src_parts = src_files.whole.empty();
  result.tgt_parts = tgt_files.whole.empty();
  if (!read_side(src_files, src, result.src_decoding, result) || !read_side(tgt_files, tgt, result.tgt_decoding, result)) {
    result.unreadable = true;
    return;
  }
  if (src.text_lines == 0 || tgt.text_lines == 0) {
    result.empty = true;
    result.warnings.push_back(name + ": no text in the " + (src.text_lines == 0 ? options.src_lang : options.tgt_lang) +
                              " file(s); skipping the day");
    return;
  }
  result.stats = aligner.align(src, tgt, result.pairs);
  const auto& s = result.stats;
  if (s.resynchronised()) {
    std::string where = src_files.whole.empty() ? name + " (" + options.src_lang + ", parts joined)" : src_files.whole;
    std::string where_tgt =
        tgt_files.whole.empty() ? name + " (" + options.tgt_lang + ", parts joined)" : tgt_files.whole;
    result.warnings.push_back(
        name + ": the tags differ between " + options.src_lang + " and " + options.tgt_lang + " (chapters only in " +
        options.src_lang + " " + std::to_string(s.chapters_only_src) + ", only in " + options.tgt_lang + " " +
        std::to_string(s.chapters_only_tgt) + "; speeches " + std::to_string(s.speeches_only_src) + " / " +
        std::to_string(s.speeches_only_tgt) + "; speeches with different paragraph counts " +
        std::to_string(s.paragraph_count_mismatches) + "), first at '" + where + "' line " +
        std::to_string(s.first_resync_src_line) + " and '" + where_tgt + "' line " +
        std::to_string(s.first_resync_tgt_line) + "; resynchronised on the next common tag");
  }
  if (s.blocks_dropped)
    result.warnings.push_back(name + ": " + std::to_string(s.blocks_dropped) + " block(s) could not be aligned (" +
                              std::to_string(s.dropped_src_sentences) + " " + options.src_lang + " and " +
                              std::to_string(s.dropped_tgt_sentences) + " " + options.tgt_lang +
                              " sentences dropped)");
}

std::string list_days(const std::vector<std::string>& days) {
  std::string out;
  for (size_t k = 0; k < days.size() && k < 10; ++k) out += (k ? ", " : "") + days[k];
  if (days.size() > 10) out += ", ... (" + std::to_string(days.size()) + " in all)";
  return out;
}

// The release's days in each language, and those in both (which are aligned); the others are logged.
struct ReleaseDays {
  std::string src_folder, tgt_folder;
  std::map<std::string, DayFiles> src_days, tgt_days;
  std::vector<std::string> common, only_src, only_tgt;
  uint64_t other_files = 0;
};

ReleaseDays pair_days(const EuroparlReleaseOptions& options) {
  ReleaseDays r;
  r.src_folder = language_folder(options.dir, options.src_lang);
  r.tgt_folder = language_folder(options.dir, options.tgt_lang);
  r.src_days = scan_language(r.src_folder, r.other_files);
  r.tgt_days = scan_language(r.tgt_folder, r.other_files);
  for (const auto& [day, files] : r.src_days) (r.tgt_days.count(day) ? r.common : r.only_src).push_back(day);
  for (const auto& [day, files] : r.tgt_days)
    if (!r.src_days.count(day)) r.only_tgt.push_back(day);
  if (!r.only_src.empty())
    spdlog::warn("europarl: {} day(s) only in '{}', skipped: {}", r.only_src.size(), r.src_folder, list_days(r.only_src));
  if (!r.only_tgt.empty())
    spdlog::warn("europarl: {} day(s) only in '{}', skipped: {}", r.only_tgt.size(), r.tgt_folder, list_days(r.only_tgt));
  if (r.common.empty())
    throw DataError("--europarl-release '" + options.dir + "': '" + r.src_folder + "' (" +
                    std::to_string(r.src_days.size()) + " days) and '" + r.tgt_folder + "' (" +
                    std::to_string(r.tgt_days.size()) + " days) have no day in common");
  spdlog::info("europarl: aligning {} days present in both {} and {}", r.common.size(), options.src_lang,
               options.tgt_lang);
  return r;
}

// The release's figures, summed over its days in day order.
struct ReleaseTotals {
  DayAlignmentStats stats;
  text::TextDecoding src_decoding, tgt_decoding;
  uint64_t days_aligned = 0, days_empty = 0, days_unreadable = 0, days_resynchronised = 0, days_in_parts = 0,
           days_beside_parts = 0;

  void add(const DayResult& r) {
    stats.add(r.stats);
    for (auto [from, to] : {std::pair{&r.src_decoding, &src_decoding}, std::pair{&r.tgt_decoding, &tgt_decoding}}) {
      to->byte_order_mark |= from->byte_order_mark;
      to->lines += from->lines;
      to->crlf_lines += from->crlf_lines;
      to->converted_lines += from->converted_lines;
    }
    days_empty += r.empty;
    days_unreadable += r.unreadable;
    days_aligned += !r.empty && !r.unreadable;
    days_resynchronised += r.stats.resynchronised();
    days_in_parts += r.src_parts || r.tgt_parts;
    days_beside_parts += r.beside_parts;
  }

  // stats.json's "europarl" entry (docs/DATASET.md).
  nlohmann::json to_json(const EuroparlReleaseOptions& options, const ReleaseDays& release, double seconds) const {
    nlohmann::json beads = nlohmann::json::object();
    for (size_t k = 0; k < stats.beads.size(); ++k)
      beads[text::bead_kind_name(static_cast<text::BeadKind>(k))] = stats.beads[k];
    auto decoding_json = [](const text::TextDecoding& d) {
      return nlohmann::json{{"lines", d.lines}, {"crlf_lines", d.crlf_lines}, {"latin1_lines", d.converted_lines},
                            {"byte_order_mark", d.byte_order_mark}};
    };
    return {
        {"dir", fs::absolute(options.dir).string()},
        {"days", {{"paired", release.common.size()},
                  {"aligned", days_aligned},
                  {"only_" + options.src_lang, release.only_src.size()},
                  {"only_" + options.tgt_lang, release.only_tgt.size()},
                  {"empty", days_empty},
                  {"unreadable", days_unreadable},
                  {"resynchronised", days_resynchronised},
                  {"in_parts", days_in_parts},
                  {"day_file_beside_parts", days_beside_parts}}},
        {"other_files", release.other_files},
        {"files", {{options.src_lang, decoding_json(src_decoding)}, {options.tgt_lang, decoding_json(tgt_decoding)}}},
        {"chapters", {{"matched", stats.chapters_matched},
                      {"only_" + options.src_lang, stats.chapters_only_src},
                      {"only_" + options.tgt_lang, stats.chapters_only_tgt}}},
        {"speeches", {{"matched", stats.speeches_matched},
                      {"only_" + options.src_lang, stats.speeches_only_src},
                      {"only_" + options.tgt_lang, stats.speeches_only_tgt},
                      {"paragraph_count_mismatches", stats.paragraph_count_mismatches}}},
        {"blocks", {{"aligned", stats.blocks - stats.blocks_dropped}, {"dropped", stats.blocks_dropped}}},
        {"sentences", {{options.src_lang, stats.src_sentences},
                       {options.tgt_lang, stats.tgt_sentences},
                       {"dropped_" + options.src_lang, stats.dropped_src_sentences},
                       {"dropped_" + options.tgt_lang, stats.dropped_tgt_sentences}}},
        {"beads", beads},
        {"pairs", stats.pairs},
        {"seconds", seconds},
    };
  }
};

}  // namespace

EuroparlReleaseResult align_europarl_release(const EuroparlReleaseOptions& options, const std::string& out_src,
                                             const std::string& out_tgt) {
  const ReleaseDays release = pair_days(options);
  const auto& common = release.common;
  const auto& src_days = release.src_days;
  const auto& tgt_days = release.tgt_days;
  text::EuroparlDayAligner aligner(options.src_lang, options.tgt_lang);
  for (const auto& lang : {options.src_lang, options.tgt_lang})
    if (!text::SentenceSplitter::has_language(lang))
      spdlog::warn("europarl: no sentence splitting rules for '{}': using the generic ones", lang);

  // Workers take days in order and stay at most `window` days ahead of the writer, so memory holds a few days'
  // pairs whatever the release's size; the writer writes and logs in day order.
  const int threads = std::max(1, options.threads);
  const size_t window = 4 * static_cast<size_t>(threads);
  std::deque<DayResult> results;  // results[k - first] for day k
  size_t first = 0;
  std::mutex mutex;
  std::condition_variable ready, room;
  std::atomic<size_t> next_day{0};
  std::exception_ptr failure;
  bool stop = false;
  auto work = [&] {
    for (;;) {
      size_t k;
      DayResult* slot;
      {
        std::unique_lock<std::mutex> lock(mutex);
        room.wait(lock, [&] { return stop || next_day.load() < first + window; });
        if (stop || next_day.load() >= common.size()) return;
        k = next_day++;
        while (results.size() <= k - first) results.emplace_back();
        slot = &results[k - first];
      }
      DayResult local;
      try {
        align_day(common[k], src_days.at(common[k]), tgt_days.at(common[k]), aligner, options, local);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
        stop = true;
        ready.notify_all();
        room.notify_all();
        return;
      }
      std::lock_guard<std::mutex> lock(mutex);
      local.done = true;
      *slot = std::move(local);  // deque elements do not move when the deque grows at the back
      ready.notify_all();
    }
  };

  OutputFile ws(out_src), wt(out_tgt);
  ReleaseTotals totals;
  const DayAlignmentStats& total = totals.stats;
  Progress progress("europarl align", "day", common.size());
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work);
  auto join = [&] {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    room.notify_all();
    for (auto& th : pool) th.join();
    pool.clear();
  };
  try {
    for (size_t k = 0; k < common.size(); ++k) {
      DayResult r;
      {
        std::unique_lock<std::mutex> lock(mutex);
        ready.wait(lock, [&] { return failure || (!results.empty() && results.front().done); });
        if (failure) std::rethrow_exception(failure);
        r = std::move(results.front());
        results.pop_front();
        ++first;
      }
      room.notify_all();
      for (const auto& w : r.warnings) spdlog::warn("europarl: {}", w);
      for (const auto& p : r.pairs) {
        ws.write_line(p.src);
        wt.write_line(p.tgt);
      }
      totals.add(r);
      progress.advance();
    }
  } catch (...) {
    join();
    throw;
  }
  join();
  ws.close();
  wt.close();
  progress.finish();

  const double seconds = progress.elapsed_seconds();
  spdlog::info("europarl: {} pairs from {} days ({} sentences {}, {} {}; {} blocks, {} dropped){}", total.pairs,
               totals.days_aligned, total.src_sentences, options.src_lang, total.tgt_sentences, options.tgt_lang,
               total.blocks, total.blocks_dropped,
               seconds > 0 ? fmt::format(", {:.0f} pairs/s", total.pairs / seconds) : std::string());
  nlohmann::json stats = totals.to_json(options, release, seconds);
  if (total.pairs == 0)
    throw DataError("--europarl-release '" + options.dir + "': no sentence pairs could be aligned from its " +
                    std::to_string(common.size()) + " common day(s) (see the warnings above)");
  return {total.pairs, stats};
}

}  // namespace parla::data

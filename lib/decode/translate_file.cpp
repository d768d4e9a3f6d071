#include "decode/translate_file.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <mutex>
#include <system_error>
#include <thread>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/progress.h"
#include "decode/input_sanitizer.h"
#include "decode/maxi_batch.h"
#include "runtime/runtime.h"
#include "runtime/runtime_device.h"

namespace parla::decode {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

FileTranslator::FileTranslator(Translator& translator, const DecodingConfig& cfg, int workers, int threads_each)
    : translator_(translator), cfg_(cfg) {
  if (workers < 1) throw ConfigError("key 'runtime.inter_threads': must be at least 1, got " + std::to_string(workers));
  if (workers > 1 && translator.options().sampling)
    throw ConfigError("key 'runtime.inter_threads' = " + std::to_string(workers) +
                      " cannot be used with sampling (decoding.sampling): the random draws would depend on which "
                      "batch a worker takes first; use 1");
  workers_ = workers;
  worker_threads_ = std::max(1, threads_each);
  printer_.n_best = cfg.n_best > 1;
  printer_.alignment = cfg.alignment;
}

void FileTranslator::search_batches(const std::vector<std::vector<int>>& ids,
                                    const std::vector<std::vector<size_t>>& batches, const SearchOptions& options,
                                    std::vector<NBestList>& results) {
  // Each batch's results go to its own lines, so batches may be searched in any order and on any worker.
  auto run_batch = [&](size_t b) {
    auto out = translator_.search_batch(ids, batches[b], options);
    for (size_t k = 0; k < batches[b].size(); ++k) results[batches[b][k]] = std::move(out[k]);
  };
  if (workers_ <= 1 || batches.size() <= 1) {
    for (size_t b = 0; b < batches.size(); ++b) run_batch(b);
    return;
  }
  // Workers take the next batch in plan order; the first failure stops the others after their current batch and
  // is rethrown here, as the serial loop would have thrown it.
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    runtime::init_worker_thread(worker_threads_);
    try {
      for (size_t b; !failed && (b = next++) < batches.size();) run_batch(b);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      failed = true;
    }
  };
  std::vector<std::thread> pool;
  const size_t n_workers = std::min(batches.size(), static_cast<size_t>(workers_));
  for (size_t w = 1; w < n_workers; ++w) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error& e) {  // no thread to be had: fewer workers, same output
      spdlog::warn("runtime.inter_threads: could not start worker {} ({}); going on with {}", w + 1, e.what(), w);
      break;
    }
  }
  work();  // this thread is the first worker
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

std::vector<std::string> FileTranslator::translate_lines(const std::vector<std::string>& lines, uint64_t first_line) {
  const size_t n = lines.size();
  std::vector<std::vector<int>> ids(n);
  std::vector<size_t> todo;  // lines with something to translate
  for (size_t i = 0; i < n; ++i) {
    ids[i] = translator_.encode_line(lines[i], "input line " + std::to_string(first_line + i));
    stats_.source_tokens += ids[i].size();
    if (!ids[i].empty()) todo.push_back(i);
  }
  std::vector<size_t> lengths;
  for (size_t i : todo) lengths.push_back(ids[i].size());
  std::vector<std::vector<size_t>> batches;
  for (const auto& batch : plan_batches(lengths, BatchLimits::from_config(cfg_))) {
    std::vector<size_t> rows;
    for (size_t k : batch) rows.push_back(todo[k]);
    batches.push_back(std::move(rows));
  }
  // Scores are computed only where they are printed (n-best lists): greedy search then skips the log-softmax.
  SearchOptions options = translator_.options();
  options.scores = printer_.n_best;
  std::vector<NBestList> results(n);
  search_batches(ids, batches, options, results);

  const auto& target_vocab = translator_.model().target_vocab;
  std::vector<std::string> formatted(n);
  for (size_t i = 0; i < n; ++i) {
    std::vector<std::string> texts;
    for (const auto& h : results[i])
      texts.push_back(target_vocab.decode(std::vector<int>(h.tokens.begin(), h.tokens.end())));
    if (!results[i].empty()) stats_.target_tokens += results[i][0].tokens.size();
    formatted[i] = printer_.format(first_line + i - 1, results[i], texts, ids[i].size());
  }
  stats_.sentences += n;
  return formatted;
}

TranslationStats FileTranslator::translate_stream(std::istream& in, OutputFile& out) {
  const auto start = Clock::now();
  const size_t max_chars = translator_.model().max_input_chars;
  LineReader reader(in, max_chars);
  const size_t window = cfg_.line_buffered ? 1 : window_sentences(BatchLimits::from_config(cfg_));
  std::vector<std::string> lines;
  std::string line;
  uint64_t first = 1;
  auto flush_window = [&] {
    auto out_of_memory = [&] {
      return DataError("out of memory on " + translator_.model().device.str() + " translating lines " +
                       std::to_string(first) + ".." + std::to_string(first + lines.size() - 1) +
                       ": lower decoding.batch_size (now " + std::to_string(cfg_.batch_size) +
                       ") or decoding.batch_tokens (now " + std::to_string(cfg_.batch_tokens) + ")");
    };
    std::vector<std::string> done;
    try {
      done = translate_lines(lines, first);
    } catch (const c10::Error& e) {
      if (!runtime::is_out_of_memory(e)) throw;
      throw out_of_memory();
    } catch (const std::bad_alloc&) {
      throw out_of_memory();
    }
    for (const auto& s : done) out.write(s);
    if (cfg_.line_buffered) out.flush();
    first += lines.size();
    lines.clear();
  };
  while (reader.next(line)) {
    if (reader.cut())
      spdlog::warn("{}", cut_chars_warning("input line " + std::to_string(reader.line_number()), reader.line_bytes(),
                                           max_chars));
    lines.push_back(std::move(line));
    if (lines.size() >= window) flush_window();
  }
  if (!lines.empty()) flush_window();
  out.flush();
  stats_.seconds += std::chrono::duration<double>(Clock::now() - start).count();
  return stats_;
}

TranslationStats translate_file(FileTranslator& translator, const std::string& input, const std::string& output) {
  std::ifstream in_file;
  std::istream* in = &std::cin;
  if (!input.empty() && input != "-") {
    in_file.open(input, std::ios::binary);
    if (!in_file) throw DataError("cannot read input file " + input);
    in = &in_file;
  }
  TranslationStats stats;
  if (output.empty() || output == "-") {
    std::cout.flush();  // whatever went to std::cout before comes first
    OutputFile out(stdout, "standard output");
    stats = translator.translate_stream(*in, out);
    out.close();
  } else {
    // Written as OUTPUT.tmp.<pid> and renamed when complete (a FIFO or device in place): a failed run leaves
    // neither a half-written OUTPUT nor the temporary, and what killed runs left is removed first.
    remove_stale_temporaries(output);
    AtomicOutputFile out(output);
    stats = translator.translate_stream(*in, out.file());
    out.commit();
  }
  if (in_file.is_open() && in_file.bad()) throw DataError("error while reading " + input);
  // Rates only where they mean something (Progress::format_rate): not for one sentence in 0.2s.
  const std::pair<uint64_t, const char*> counts[] = {
      {stats.sentences, "sentence"}, {stats.target_tokens, "target token"}, {stats.source_tokens, "source token"}};
  std::string rates;
  for (const auto& [count, unit] : counts) {
    std::string r = Progress::format_rate(count, stats.seconds, unit);
    if (!r.empty()) rates += (rates.empty() ? ": " : ", ") + r;
  }
  spdlog::info("translated {} in {}{}", Progress::format_count(stats.sentences, "sentence"),
               Progress::format_duration(stats.seconds), rates);
  return stats;
}

}  // namespace parla::decode

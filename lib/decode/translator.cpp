#include "decode/translator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <future>
#include <iostream>
#include <limits>
#include <mutex>
#include <system_error>
#include <thread>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/heap_allocator.h"
#include "core/memory_pages.h"
#include "core/progress.h"
#include "runtime/runtime.h"
#include "runtime/runtime_device.h"
#include "core/output_file.h"
#include "decode/ensemble.h"
#include "decode/input_sanitizer.h"
#include "decode/language_tokens.h"
#include "text/language_codes.h"
#include "decode/lexical_shortlist.h"
#include "decode/maxi_batch.h"
#include "decode/sampling.h"
#include "decode/search.h"
#include "decode/source_batch.h"
#include "models/checkpoint.h"
#include "models/packed_fp32.h"
#include "kernels/fp32_gemm.h"
#include "kernels/int8_gemm.h"

namespace parla::decode {
namespace {

using Clock = std::chrono::steady_clock;

// decoding.max_input_length = 0 on a model without a position limit (sinusoidal positions, an RNN): the limit of a
// model with model.max_positions' default 1024 positions (one is EOS's), so that no model decodes sources of
// unbounded length by default (a 50 MB line of words made 300,000 pieces and 23 GB, issue 35).
constexpr int64_t kDefaultMaxInputLength = 1023;
// decoding.max_input_chars = 0 derives the character budget from the piece limit: SentencePiece's pieces are at
// most 16 characters long (max_sentencepiece_length, which parla's vocabularies keep at its default), doubled for
// the blanks that collapse into one piece boundary and for normalisation that contracts (NFKC composing marks).
constexpr int64_t kCharsPerPiece = 32;

std::string warn_cut_chars(const std::string& where, uint64_t bytes, size_t max_chars) {
  return where + ": " + std::to_string(bytes) + " bytes, longer than the limit of " + std::to_string(max_chars) +
         " characters (decoding.max_input_chars); cut before tokenizing";
}

}  // namespace

Translator::Translator(std::shared_ptr<models::Seq2SeqModel> model, text::SentencePieceVocab source_vocab,
                       text::SentencePieceVocab target_vocab, const DecodingConfig& cfg, uint64_t seed,
                       const c10::Device& device, c10::ScalarType precision, const nlohmann::json& languages)
    : model_(std::move(model)),
      src_vocab_(std::move(source_vocab)),
      tgt_vocab_(std::move(target_vocab)),
      cfg_(cfg),
      options_(SearchOptions::from_config(cfg)),
      device_(device),
      precision_(precision),
      generator_(make_generator(seed, device)) {
  if (model_->vocab_size() != tgt_vocab_.size())
    throw DataError("the model's target vocabulary has " + std::to_string(model_->vocab_size()) +
                    " entries but its SentencePiece model has " + std::to_string(tgt_vocab_.size()));
  model_->to(device_);
  model_->eval();
  printer_.n_best = cfg.n_best > 1;
  printer_.alignment = cfg.alignment;
  // The source needs one position for EOS.
  int64_t limit = model_->max_positions();
  const bool unlimited = limit == std::numeric_limits<int64_t>::max();
  max_input_ = unlimited ? kDefaultMaxInputLength : std::max<int64_t>(1, limit - 1);
  if (cfg.max_input_length > 0)
    max_input_ = unlimited ? cfg.max_input_length : std::min<int64_t>(max_input_, cfg.max_input_length);
  max_chars_ = static_cast<size_t>(cfg.max_input_chars > 0 ? cfg.max_input_chars : max_input_ * kCharsPerPiece);
  const auto tokens = resolve_language_tokens(languages, cfg, src_vocab_, tgt_vocab_);
  source_language_ = tokens.source;
  language_ids_ = text::language_ids(languages, src_vocab_);
  options_.target_prefix = tokens.target_prefix;
  if (source_language_ >= 0 && max_input_ > 1) --max_input_;  // the language token takes a position
  if (!cfg.shortlist.empty()) {
    auto shortlist = std::make_shared<const LexicalShortlist>(LexicalShortlist::load(cfg.shortlist, src_vocab_, tgt_vocab_));
    if (!model_->supports_shortlist())
      throw ConfigError("decoding.shortlist: this model cannot restrict its output to a shortlist");
    size_t rules = 0;
    for (size_t n = 1; n <= shortlist->max_ngram(); ++n) rules += shortlist->rules(n).size();
    spdlog::info("shortlist {}: {} pieces always allowed, {} source rules", cfg.shortlist, shortlist->always().size(),
                 rules);
    options_.shortlist = std::move(shortlist);
  }
}

namespace {

// Translator::load's work; what it allocates and frees is gone when it returns.
Translator load_translator(const std::vector<std::string>& checkpoints, const DecodingConfig& cfg, uint64_t seed,
                           const c10::Device& device) {
  if (checkpoints.empty()) throw UsageError("no model given: pass a checkpoint with -m/--models");
  // Before loading: int8 on a GPU is refused without reading a file.
  const c10::ScalarType precision = runtime::resolve_precision(cfg.precision, device, "decoding.precision");
  std::vector<std::shared_ptr<models::Seq2SeqModel>> members;
  models::ModelMeta first;
  // The first checkpoint's SentencePiece models build on another thread while its weights load (start-up: 0.1-0.2 s
  // of 1.3 s at the OPUS-MT size).
  std::future<std::pair<text::SentencePieceVocab, text::SentencePieceVocab>> vocabularies;
  for (size_t i = 0; i < checkpoints.size(); ++i) {
    const auto& path = checkpoints[i];
    auto loaded = models::load_seq2seq(path, device, [&](const models::ModelMeta& meta) {
      if (meta.src_spm.empty() || meta.tgt_spm.empty())
        throw DataError("checkpoint " + path + " carries no SentencePiece model, so it cannot translate raw text");
      if (i > 0) return;
      first = meta;
      vocabularies = std::async(std::launch::async,
                                [&first, &checkpoints] { return models::vocabularies(first, checkpoints[0]); });
    }, /*int8=*/cfg.precision == Precision::kInt8);  // a float checkpoint is quantized as it loads
    if (i > 0 && (loaded.meta.src_spm != first.src_spm || loaded.meta.tgt_spm != first.tgt_spm ||
               loaded.meta.src_pieces != first.src_pieces || loaded.meta.tgt_pieces != first.tgt_pieces)) {
      throw DataError("checkpoint " + path + " uses different SentencePiece models than " + checkpoints[0] +
                      ": ensemble members must share their vocabularies");
    }
    if (!loaded.meta.int8.empty() && cfg.precision != Precision::kInt8 && cfg.precision != Precision::kFp32)
      throw ConfigError("decoding.precision '" + std::string(config::name_of(cfg.precision)) + "': " + path +
                        " is an int8 checkpoint; it decodes with int8 (or fp32, which means the same for it)");
    const bool int8 = cfg.precision == Precision::kInt8 || !loaded.meta.int8.empty();
    // fp32 on the CPU: the weights packed for the decoder's products where they pay (models/packed_fp32.h).
    const bool packed =
        !int8 && cfg.precision == Precision::kFp32 && device.is_cpu() && models::pack_fp32(*loaded.model);
    spdlog::info("loaded {} ({} model{})", path,
                 loaded.meta.config.value("model", nlohmann::json::object()).value("type", std::string("?")),
                 int8     ? ", int8 on " + kernels::int8::activation_code().isa
                 : packed ? ", fp32 packed for " + std::string(kernels::fp32::isa_name(kernels::fp32::best_isa()))
                          : std::string());
    members.push_back(std::move(loaded.model));
  }
  std::shared_ptr<models::Seq2SeqModel> model;
  if (members.size() == 1) {
    model = members[0];
  } else {
    model = std::make_shared<Ensemble>(members);
    spdlog::info("ensemble of {} models (mean log-probabilities)", members.size());
  }
  auto [src, tgt] = vocabularies.get();
  try {
    return Translator(model, src, tgt, cfg, seed, device, precision, first.languages);
  } catch (const DataError& e) {
    throw DataError("checkpoint " + checkpoints[0] + ": " + e.what());
  }
}

}  // namespace

Translator Translator::load(const std::vector<std::string>& checkpoints, const DecodingConfig& cfg, uint64_t seed,
                            const c10::Device& device) {
  // The libraries' pages that starting touched (LibTorch's operator registration: ~25 MB of libtorch_cpu alone)
  // leave memory before the model comes in, and those that loading touched after it (core/memory_pages.h): a
  // process that translates holds the code it runs, not the code it ran once.
  page_out_libraries();
  Translator loaded = load_translator(checkpoints, cfg, seed, device);
  // What loading freed (file copies, the float weights that int8 replaced) goes back to the system rather than
  // staying resident beside what decoding allocates.
  return_free_memory();
  page_out_libraries();
  return loaded;
}

std::vector<int> Translator::encode_line(const std::string& line, const std::string& where) const {
  // Lines read by translate_stream are within the budget already; serve's and translate_lines' are cut here.
  const size_t keep = kept_bytes(line, max_chars_);
  if (keep < line.size()) spdlog::warn("{}", warn_cut_chars(where, line.size(), max_chars_));
  auto clean = sanitize_line(keep < line.size() ? line.substr(0, keep) : line);
  if (clean.invalid_utf8 > 0)
    spdlog::warn("{}: {} invalid UTF-8 sequence(s) replaced with U+FFFD", where, clean.invalid_utf8);
  if (clean.control_chars > 0)
    spdlog::warn("{}: {} control character(s) replaced with spaces", where, clean.control_chars);
  auto ids = src_vocab_.encode(clean.text);
  if (static_cast<int64_t>(ids.size()) > max_input_) {
    spdlog::warn("{}: {} pieces, longer than the limit of {}; truncated", where, ids.size(), max_input_);
    ids.resize(static_cast<size_t>(max_input_));
  }
  if (source_language_ >= 0 && !ids.empty()) ids.insert(ids.begin(), source_language_);
  return ids;
}

std::vector<NBestList> Translator::search_rows(const std::vector<std::vector<int>>& ids,
                                               const std::vector<size_t>& rows, const SearchOptions& options) {
  runtime::AutocastScope autocast(device_, precision_);
  return search(*model_, source_batch(ids, rows).to(device_), options, &generator_);
}

std::vector<std::vector<Translation>> Translator::translate_encoded(const std::vector<std::vector<int>>& sources,
                                                                    const SearchOptions& options) {
  torch::NoGradGuard no_grad;
  std::vector<size_t> rows(sources.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  const auto found = search_rows(sources, rows, options);
  std::vector<std::vector<Translation>> out(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) out[i] = to_translations(found[i], tgt_vocab_);
  return out;
}

void Translator::set_inter_threads(int workers, int threads_each) {
  if (workers < 1) throw ConfigError("key 'runtime.inter_threads': must be at least 1, got " + std::to_string(workers));
  if (workers > 1 && options_.sampling)
    throw ConfigError("key 'runtime.inter_threads' = " + std::to_string(workers) +
                      " cannot be used with sampling (decoding.sampling): the random draws would depend on which "
                      "batch a worker takes first; use 1");
  workers_ = workers;
  worker_threads_ = std::max(1, threads_each);
}

std::unique_ptr<TranslationStream> Translator::open_stream(const SearchOptions& options) {
  if (options.sampling) throw UsageError("continuous batching runs beam search; sampling is not served");
  return std::make_unique<TranslationStream>(*model_, tgt_vocab_, options, device_, precision_);
}

std::vector<std::string> Translator::translate_lines(const std::vector<std::string>& lines, uint64_t first_line) {
  torch::NoGradGuard no_grad;
  const size_t n = lines.size();
  std::vector<std::vector<int>> ids(n);
  std::vector<size_t> todo;  // lines with something to translate
  for (size_t i = 0; i < n; ++i) {
    ids[i] = encode_line(lines[i], "input line " + std::to_string(first_line + i));
    stats_.source_tokens += ids[i].size();
    if (!ids[i].empty()) todo.push_back(i);
  }

  std::vector<NBestList> results(n);
  std::vector<size_t> lengths;
  for (size_t i : todo) lengths.push_back(ids[i].size());
  const BatchLimits limits = BatchLimits::from_config(cfg_);
  std::vector<std::vector<size_t>> batches;
  for (const auto& batch : plan_batches(lengths, limits)) {
    std::vector<size_t> rows;
    for (size_t k : batch) rows.push_back(todo[k]);
    batches.push_back(std::move(rows));
  }
  // Each batch's results go to its own lines, so batches may be searched in any order and on any worker.
  // Scores are computed only where they are printed (n-best lists): greedy search then skips the log-softmax.
  SearchOptions options = options_;
  options.scores = printer_.n_best;
  auto run_batch = [&](size_t b) {
    auto out = search_rows(ids, batches[b], options);
    for (size_t k = 0; k < batches[b].size(); ++k) results[batches[b][k]] = std::move(out[k]);
  };
  if (workers_ <= 1 || batches.size() <= 1) {
    for (size_t b = 0; b < batches.size(); ++b) run_batch(b);
  } else {
    // Workers take the next batch in plan order; the first failure stops the others after their current batch
    // and is rethrown here, as the serial loop would have thrown it.
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto work = [&] {
      runtime::init_worker_thread(worker_threads_);
      torch::NoGradGuard worker_no_grad;  // thread-local, like autocast (search_rows sets that)
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

  std::vector<std::string> formatted(n);
  for (size_t i = 0; i < n; ++i) {
    std::vector<std::string> texts;
    for (const auto& h : results[i]) texts.push_back(tgt_vocab_.decode(std::vector<int>(h.tokens.begin(), h.tokens.end())));
    if (!results[i].empty()) stats_.target_tokens += results[i][0].tokens.size();
    formatted[i] = printer_.format(first_line + i - 1, results[i], texts, ids[i].size());
  }
  stats_.sentences += n;
  return formatted;
}

TranslationStats Translator::translate_stream(std::istream& in, OutputFile& out) {
  const auto start = Clock::now();
  LineReader reader(in, max_chars_);
  const BatchLimits limits = BatchLimits::from_config(cfg_);
  const size_t window = cfg_.line_buffered ? 1 : window_sentences(limits);
  std::vector<std::string> lines;
  std::string line;
  uint64_t first = 1;
  auto flush_window = [&] {
    auto out_of_memory = [&] {
      return DataError("out of memory on " + device_.str() + " translating lines " + std::to_string(first) + ".." +
                       std::to_string(first + lines.size() - 1) + ": lower decoding.batch_size (now " +
                       std::to_string(cfg_.batch_size) + ") or decoding.batch_tokens (now " +
                       std::to_string(cfg_.batch_tokens) + ")");
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
      spdlog::warn("{}", warn_cut_chars("input line " + std::to_string(reader.line_number()), reader.line_bytes(),
                                  max_chars_));
    lines.push_back(std::move(line));
    if (lines.size() >= window) flush_window();
  }
  if (!lines.empty()) flush_window();
  out.flush();
  stats_.seconds += std::chrono::duration<double>(Clock::now() - start).count();
  return stats_;
}

TranslationStats translate_file(Translator& translator, const std::string& input, const std::string& output) {
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

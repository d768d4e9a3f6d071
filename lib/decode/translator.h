#pragma once
// The translator behind parla-translate (CTranslate2's translator.h, Marian's translator/): raw text lines in,
// detokenised translations out, in input order, exactly one result per input line whatever the bytes.
// Lines are cut to a character budget as they are read (decoding.max_input_chars, so memory does not grow with a
// line's length), sanitised (decode/input_sanitizer.h), encoded with the checkpoint's SentencePiece model, cut at
// the model's length limit with a warning naming the line, batched in length-sorted maxi-batches
// (decode/maxi_batch.h), searched (decode/search.h) and printed (decode/output_printer.h).
#include <cstdint>
#include <istream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include "core/config/decoding_config.h"
#include "core/output_file.h"
#include "decode/hypothesis.h"
#include "decode/output_printer.h"
#include "decode/search_options.h"
#include "decode/translation.h"
#include "decode/translation_stream.h"
#include "models/seq2seq.h"
#include "text/sentencepiece_vocab.h"

namespace parla::decode {

struct TranslationStats {
  uint64_t sentences = 0;
  uint64_t source_tokens = 0;  // SentencePiece pieces read (after truncation)
  uint64_t target_tokens = 0;  // pieces of the printed best translations (EOS not counted)
  double seconds = 0;
};

class Translator {
 public:
  // `model` may be an Ensemble; it is moved to `device` (resolved by runtime::resolve_device), where batches,
  // search and the sampling generator (seeded with `seed`) live too. Decoding runs under autocast to `precision`
  // (cfg.precision resolved for that device by runtime::resolve_precision, once, by load()).
  // `languages`: a multilingual model's (models::ModelMeta::languages), resolved with decoding.source_lang,
  // target_lang and target_prefix (decode/language_tokens.h).
  Translator(std::shared_ptr<models::Seq2SeqModel> model, text::SentencePieceVocab source_vocab,
             text::SentencePieceVocab target_vocab, const DecodingConfig& cfg, uint64_t seed, const c10::Device& device,
             c10::ScalarType precision, const nlohmann::json& languages = nlohmann::json::object());

  // Loads one checkpoint, or several as an ensemble (they must carry identical SentencePiece models and
  // vocabulary sizes), onto `device`. DataError naming the file for a missing, corrupt, non-parla or
  // incompatible checkpoint.
  static Translator load(const std::vector<std::string>& checkpoints, const DecodingConfig& cfg, uint64_t seed,
                         const c10::Device& device = c10::Device(c10::DeviceType::CPU));

  // Translates a window of raw lines (line numbers first_line, first_line+1, ... 1-based, for warnings and
  // n-best ids) and returns each line's formatted output ("text\n", or n-best lines), in input order.
  std::vector<std::string> translate_lines(const std::vector<std::string>& lines, uint64_t first_line = 1);

  // The two halves of translate_lines, for parla-serve, which batches sentences from many requests itself.
  // encode_line: one raw line -> source piece ids: cut to max_input_chars() characters, sanitised and cut at
  // max_input_length() pieces, each cut with a warning naming `where` (e.g. "input line 7"); thread-safe.
  // translate_encoded: one batch of non-empty sources searched together with `options` (a copy of options() with
  // a request's beam size and n-best, say), each sentence's hypotheses detokenised, best first. The result of a
  // sentence does not depend on the rest of its batch.
  std::vector<int> encode_line(const std::string& line, const std::string& where) const;
  std::vector<std::vector<Translation>> translate_encoded(const std::vector<std::vector<int>>& sources,
                                                        const SearchOptions& options);
  // Continuous batching: a search with `options` that sentences join between steps
  // (decode/translation_stream.h); each sentence's result equals translate_encoded's. UsageError for sampling.
  // Used from one thread at a time; the translator outlives it.
  std::unique_ptr<TranslationStream> open_stream(const SearchOptions& options);

  // runtime.inter_threads: translate_lines and translate_stream search up to `workers` batches of a window at
  // once, each worker with `threads_each` intra-op threads; the output is the same as with one (each batch's
  // search is on its own, and results go back to their lines). ConfigError naming runtime.inter_threads with
  // sampling, whose random draws would then depend on which batch ran first.
  void set_inter_threads(int workers, int threads_each);
  int inter_threads() const { return workers_; }

  // Reads all of `in`, writes to `out`: maxi-batches of decoding.maxi_batch batches, or with
  // decoding.line_buffered each line translated and flushed as soon as it is read. IoError naming the output and
  // the system's reason when writing fails; DataError naming decoding.batch_size/batch_tokens when the device runs
  // out of memory.
  TranslationStats translate_stream(std::istream& in, OutputFile& out);

  // The longest source (pieces, without EOS) kept: decoding.max_input_length and the model's positions (1023 for a
  // model without a limit, unless max_input_length says otherwise).
  int64_t max_input_length() const { return max_input_; }
  // The characters of a raw line kept before it is sanitised and tokenized (decoding.max_input_chars, or derived
  // from max_input_length()); parla-translate reads no more of a line than this.
  size_t max_input_chars() const { return max_chars_; }
  // The search the `decoding` keys describe (SearchOptions::from_config): what translate_lines and
  // translate_stream search with.
  const SearchOptions& options() const { return options_; }
  const TranslationStats& stats() const { return stats_; }
  // A multilingual model's language codes and their tokens' ids (decode/language_tokens.h), and the source
  // language token encode_line puts first (-1: none).
  const std::map<std::string, int>& language_ids() const { return language_ids_; }
  int source_language() const { return source_language_; }
  const c10::Device& device() const { return device_; }
  // Float (fp32), BFloat16 or Half: the autocast dtype decoding.precision resolved to.
  c10::ScalarType precision() const { return precision_; }

 private:
  // One batch of sources (rows of `ids`) searched under the decoding precision's autocast.
  std::vector<NBestList> search_rows(const std::vector<std::vector<int>>& ids, const std::vector<size_t>& rows,
                                     const SearchOptions& options);

  std::shared_ptr<models::Seq2SeqModel> model_;
  text::SentencePieceVocab src_vocab_, tgt_vocab_;
  DecodingConfig cfg_;
  SearchOptions options_;
  OutputPrinter printer_;
  c10::Device device_;
  c10::ScalarType precision_;
  at::Generator generator_;
  int64_t max_input_;
  size_t max_chars_;
  int source_language_ = -1;  // the source language's token, placed before each line's pieces; -1 = none
  std::map<std::string, int> language_ids_;
  TranslationStats stats_;
  int workers_ = 1, worker_threads_ = 1;
};

// parla-translate's I/O: reads `input` ("-" = stdin), writes `output` ("-" = stdout; a file is written as
// OUTPUT.tmp.<pid> and renamed when complete, so a failed run leaves neither a half-written output nor the
// temporary, and the temporaries of killed runs are removed first; a FIFO or a device is written in place).
// Write errors name "standard output" or the file, and the system's reason ("No space left on device"). Logs
// the sentence count and, where they mean something, sentences/s and tokens/s to stderr at the end.
TranslationStats translate_file(Translator& translator, const std::string& input, const std::string& output);

}  // namespace parla::decode

#pragma once
// parla-translate's work over a Translator (Marian's translator/ loop): raw text lines in, formatted translations
// out, in input order, exactly one result per input line whatever the bytes. Lines are cut to the model's character
// budget as they are read (so memory does not grow with a line's length), read in windows of maxi-batches, batched
// by length (decode/maxi_batch.h), searched by up to runtime.inter_threads workers, and printed
// (decode/output_printer.h) to a file written whole or not at all.
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "core/config/decoding_config.h"
#include "core/output_file.h"
#include "decode/output_printer.h"
#include "decode/translator.h"

namespace parla::decode {

struct TranslationStats {
  uint64_t sentences = 0;
  uint64_t source_tokens = 0;  // SentencePiece pieces read (after truncation)
  uint64_t target_tokens = 0;  // pieces of the printed best translations (EOS not counted)
  double seconds = 0;
};

class FileTranslator {
 public:
  // `cfg`: the batching (batch_size, batch_tokens, maxi_batch), output (n_best, alignment) and line_buffered keys;
  // the search is the translator's options(). runtime.inter_threads: up to `workers` batches of a window are
  // searched at once, each worker with `threads_each` intra-op threads; the output is the same as with one (each
  // batch's search is on its own, and results go back to their lines). ConfigError naming runtime.inter_threads
  // below 1, or above 1 with sampling, whose random draws would then depend on which batch ran first.
  FileTranslator(Translator& translator, const DecodingConfig& cfg, int workers = 1, int threads_each = 1);

  // Translates a window of raw lines (line numbers first_line, first_line+1, ... 1-based, for warnings and
  // n-best ids) and returns each line's formatted output ("text\n", or n-best lines), in input order.
  std::vector<std::string> translate_lines(const std::vector<std::string>& lines, uint64_t first_line = 1);

  // Reads all of `in`, writes to `out`: windows of decoding.maxi_batch batches, or with decoding.line_buffered
  // each line translated and flushed as soon as it is read. IoError naming the output and the system's reason when
  // writing fails; DataError naming decoding.batch_size/batch_tokens when the device runs out of memory.
  TranslationStats translate_stream(std::istream& in, OutputFile& out);

  const TranslationStats& stats() const { return stats_; }

 private:
  // Searches `batches` (rows of `ids`) on the workers; each batch's hypotheses go to its rows of `results`.
  void search_batches(const std::vector<std::vector<int>>& ids, const std::vector<std::vector<size_t>>& batches,
                      const SearchOptions& options, std::vector<NBestList>& results);

  Translator& translator_;
  DecodingConfig cfg_;
  OutputPrinter printer_;
  TranslationStats stats_;
  int workers_ = 1, worker_threads_ = 1;
};

// parla-translate's I/O: reads `input` ("-" = stdin), writes `output` ("-" = stdout; a file is written as
// OUTPUT.tmp.<pid> and renamed when complete, so a failed run leaves neither a half-written output nor the
// temporary, and the temporaries of killed runs are removed first; a FIFO or a device is written in place).
// Write errors name "standard output" or the file, and the system's reason ("No space left on device"). Logs
// the sentence count and, where they mean something, sentences/s and tokens/s to stderr at the end.
TranslationStats translate_file(FileTranslator& translator, const std::string& input, const std::string& output);

}  // namespace parla::decode

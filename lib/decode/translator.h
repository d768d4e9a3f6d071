#pragma once
// A translator over a loaded model (CTranslate2's Translator): source lines become piece ids, batches of them are
// searched, and hypotheses come back detokenised. What to read, how to batch a file and where to print are
// decode/translate_file.h's; the cross-request batching of parla-serve is serve/'s. Both call this class.
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>

#include "decode/hypothesis.h"
#include "decode/search_options.h"
#include "decode/translation.h"
#include "decode/translation_model.h"
#include "decode/translation_stream.h"

namespace parla::decode {

class Translator {
 public:
  // Searches on the model's device; sampling draws from a generator seeded with `seed` there.
  Translator(std::shared_ptr<const TranslationModel> model, uint64_t seed);

  // One raw line -> source piece ids: cut to model().max_input_chars characters, sanitised (decode/input_sanitizer.h),
  // encoded, cut at model().max_input_length pieces (each cut with a warning naming `where`, e.g. "input line 7"),
  // and the source language's token put first. Thread-safe.
  std::vector<int> encode_line(const std::string& line, const std::string& where) const;
  // Non-empty sources (rows `rows` of `ids`) searched together with `options` under the model's precision; each
  // sentence's hypotheses, best first. A sentence's result does not depend on the rest of its batch. Safe from
  // several threads at once except with sampling (which draws from the one generator).
  std::vector<NBestList> search_batch(const std::vector<std::vector<int>>& ids, const std::vector<size_t>& rows,
                                      const SearchOptions& options);
  // search_batch over all of `sources`, each hypothesis detokenised (what parla-serve answers).
  std::vector<std::vector<Translation>> translate_batch(const std::vector<std::vector<int>>& sources,
                                                        const SearchOptions& options);
  // Continuous batching: a search with `options` that sentences join between steps
  // (decode/translation_stream.h); each sentence's result equals translate_batch's. UsageError for sampling.
  // Used from one thread at a time; the translator outlives it.
  std::unique_ptr<TranslationStream> open_stream(const SearchOptions& options);

  const TranslationModel& model() const { return *model_; }
  // The search the `decoding` keys describe (TranslationModel::options).
  const SearchOptions& options() const { return model_->options; }

 private:
  std::shared_ptr<const TranslationModel> model_;
  at::Generator generator_;
};

}  // namespace parla::decode

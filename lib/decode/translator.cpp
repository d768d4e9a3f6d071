#include "decode/translator.h"

#include <utility>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "core/error.h"
#include "decode/input_sanitizer.h"
#include "decode/sampling.h"
#include "decode/search.h"
#include "decode/source_batch.h"
#include "runtime/runtime_device.h"

namespace parla::decode {

Translator::Translator(std::shared_ptr<const TranslationModel> model, uint64_t seed)
    : model_(std::move(model)), generator_(make_generator(seed, model_->device)) {}

std::vector<int> Translator::encode_line(const std::string& line, const std::string& where) const {
  const TranslationModel& m = *model_;
  // Lines read by translate_file's reader are within the budget already; serve's and translate_lines' are cut here.
  const size_t keep = kept_bytes(line, m.max_input_chars);
  if (keep < line.size()) spdlog::warn("{}", cut_chars_warning(where, line.size(), m.max_input_chars));
  auto clean = sanitize_line(keep < line.size() ? line.substr(0, keep) : line);
  if (clean.invalid_utf8 > 0)
    spdlog::warn("{}: {} invalid UTF-8 sequence(s) replaced with U+FFFD", where, clean.invalid_utf8);
  if (clean.control_chars > 0)
    spdlog::warn("{}: {} control character(s) replaced with spaces", where, clean.control_chars);
  auto ids = m.source_vocab.encode(clean.text);
  if (static_cast<int64_t>(ids.size()) > m.max_input_length) {
    spdlog::warn("{}: {} pieces, longer than the limit of {}; truncated", where, ids.size(), m.max_input_length);
    ids.resize(static_cast<size_t>(m.max_input_length));
  }
  if (m.source_language >= 0 && !ids.empty()) ids.insert(ids.begin(), m.source_language);
  return ids;
}

std::vector<NBestList> Translator::search_batch(const std::vector<std::vector<int>>& ids,
                                                const std::vector<size_t>& rows, const SearchOptions& options) {
  torch::NoGradGuard no_grad;  // thread-local, like autocast: set here for whichever thread searches
  runtime::AutocastScope autocast(model_->device, model_->precision);
  return search(*model_->model, source_batch(ids, rows).to(model_->device), options, &generator_);
}

std::vector<std::vector<Translation>> Translator::translate_batch(const std::vector<std::vector<int>>& sources,
                                                                  const SearchOptions& options) {
  std::vector<size_t> rows(sources.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  const auto found = search_batch(sources, rows, options);
  std::vector<std::vector<Translation>> out(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) out[i] = to_translations(found[i], model_->target_vocab);
  return out;
}

std::unique_ptr<TranslationStream> Translator::open_stream(const SearchOptions& options) {
  if (options.sampling) throw UsageError("continuous batching runs beam search; sampling is not served");
  return std::make_unique<TranslationStream>(*model_->model, model_->target_vocab, options, model_->device,
                                             model_->precision);
}

}  // namespace parla::decode

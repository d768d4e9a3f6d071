#include "decode/translation_stream.h"

#include <torch/torch.h>

#include "runtime/runtime_device.h"
#include "decode/source_batch.h"

namespace parla::decode {

std::vector<Translation> to_translations(const NBestList& hypotheses, const text::SentencePieceVocab& target_vocab) {
  std::vector<Translation> out;
  for (const auto& h : hypotheses)
    out.push_back({target_vocab.decode(std::vector<int>(h.tokens.begin(), h.tokens.end())), h.score, h.tokens.size()});
  return out;
}

TranslationStream::TranslationStream(models::Seq2SeqModel& model, const text::SentencePieceVocab& target_vocab,
                                     const SearchOptions& options, const c10::Device& device,
                                     c10::ScalarType precision)
    : target_vocab_(target_vocab), device_(device), precision_(precision), search_(model, options) {}

void TranslationStream::add(const std::vector<std::vector<int>>& sources, const std::vector<int64_t>& ids) {
  torch::NoGradGuard no_grad;
  runtime::AutocastScope autocast(device_, precision_);
  std::vector<size_t> rows(sources.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  search_.add(source_batch(sources, rows).to(device_), ids);
}

std::vector<std::pair<int64_t, std::vector<Translation>>> TranslationStream::step() {
  torch::NoGradGuard no_grad;
  std::vector<std::pair<int64_t, NBestList>> finished;
  {
    runtime::AutocastScope autocast(device_, precision_);
    finished = search_.step();
  }
  std::vector<std::pair<int64_t, std::vector<Translation>>> out;
  for (auto& [id, best] : finished) out.emplace_back(id, to_translations(best, target_vocab_));
  return out;
}

}  // namespace parla::decode

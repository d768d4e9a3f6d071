#include "decode/search_shortlist.h"

#include <torch/torch.h>

#include "core/error.h"
#include "decode/step_constraints.h"

namespace parla::decode {

std::vector<std::vector<int64_t>> sentence_vocabularies(const LexicalShortlist& shortlist, const torch::Tensor& src) {
  auto host = src.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t width = host.size(1);
  const auto lengths = source_lengths(host);  // the pieces, without EOS and padding
  std::vector<std::vector<int64_t>> out;
  out.reserve(lengths.size());
  for (size_t b = 0; b < lengths.size(); ++b)
    out.push_back(shortlist.candidates(host.data_ptr<int64_t>() + static_cast<int64_t>(b) * width, lengths[b]));
  return out;
}

void require_shortlist_support(const models::Seq2SeqModel& model) {
  if (!model.supports_shortlist())
    throw UsageError("decoding.shortlist: this model cannot restrict its output to a shortlist");
}

}  // namespace parla::decode

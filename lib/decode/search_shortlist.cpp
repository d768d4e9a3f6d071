#include "decode/search_shortlist.h"

#include <torch/torch.h>

#include "core/error.h"
#include "text/special_ids.h"

namespace parla::decode {

std::vector<std::vector<int64_t>> sentence_vocabularies(const LexicalShortlist& shortlist, const torch::Tensor& src) {
  auto host = src.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t batch = host.size(0), width = host.size(1);
  std::vector<std::vector<int64_t>> out;
  out.reserve(batch);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t* row = host.data_ptr<int64_t>() + b * width;
    int64_t length = 0;  // the pieces, without EOS and padding
    while (length < width && row[length] != kPadId && row[length] != kEosId) ++length;
    out.push_back(shortlist.candidates(row, length));
  }
  return out;
}

void require_shortlist_support(const models::Seq2SeqModel& model) {
  if (!model.supports_shortlist())
    throw UsageError("decoding.shortlist: this model cannot restrict its output to a shortlist");
}

}  // namespace parla::decode

#include "decode/greedy_search.h"

#include <torch/torch.h>

#include "decode/greedy_choice.h"
#include "decode/single_path_search.h"

namespace parla::decode {

std::vector<NBestList> greedy_search(models::Seq2SeqModel& model, const torch::Tensor& src, const SearchOptions& o) {
  return single_path_search(
      model, src, o,
      [](const torch::Tensor& logp) {
        auto best = logp.max(1);
        return std::make_pair(std::get<1>(best), std::get<0>(best));
      },
      [&](const torch::Tensor& logits, int64_t step, const std::vector<int64_t>& max_len) {
        return greedy_choice(logits, step, max_len, o.min_length, model.start_id());
      });
}

}  // namespace parla::decode

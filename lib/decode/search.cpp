#include "decode/search.h"

#include "core/error.h"
#include "decode/beam_search.h"
#include "decode/greedy_search.h"
#include "decode/sampling.h"

namespace parla::decode {

std::vector<NBestList> search(models::Seq2SeqModel& model, const torch::Tensor& src, const SearchOptions& o,
                              at::Generator* generator) {
  if (src.size(0) == 0) return {};
  if (o.sampling) {
    if (!generator) throw UsageError("sampling needs a random generator");
    return sample(model, src, o, *generator);
  }
  if (o.beam_size == 1 && o.n_best <= 1) return greedy_search(model, src, o);
  return beam_search(model, src, o);
}

}  // namespace parla::decode

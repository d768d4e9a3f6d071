#include "decode/sampling.h"

#include <limits>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "decode/length_penalty.h"
#include "decode/step_constraints.h"

namespace parla::decode {

at::Generator make_generator(uint64_t seed) { return at::detail::createCPUGenerator(seed); }

std::vector<NBestList> sample(models::Seq2SeqModel& model, const torch::Tensor& src, const SearchOptions& o,
                              at::Generator& generator) {
  torch::NoGradGuard no_grad;
  const int64_t batch = src.size(0);
  const auto src_len = source_lengths(src);
  std::vector<int64_t> limit(batch);
  for (int64_t b = 0; b < batch; ++b) limit[b] = max_output_length(o, src_len[b], model.max_positions());

  std::vector<NBestList> out(batch);
  std::vector<Hypothesis> hyp(batch);
  std::vector<int64_t> active(batch);
  for (int64_t b = 0; b < batch; ++b) active[b] = b;
  auto state = model.start(src);
  auto prev = torch::full({batch}, models::kBosId, torch::dtype(torch::kLong).device(src.device()));

  for (int64_t step = 0; !active.empty(); ++step) {
    torch::Tensor attention;
    auto logp = model.step(prev, *state, o.attention ? &attention : nullptr).to(torch::kFloat);
    std::vector<int64_t> row_limit(active.size());
    for (size_t r = 0; r < active.size(); ++r) row_limit[r] = limit[active[r]];
    constrain_step(logp, step, row_limit, o.min_length);
    auto logits = logp / o.temperature;
    if (o.top_k > 0 && o.top_k < logits.size(1)) {
      // Everything below the k-th largest value is excluded (ties at the threshold stay in).
      auto kth = std::get<0>(logits.topk(o.top_k, 1)).select(1, o.top_k - 1).unsqueeze(1);
      logits = logits.masked_fill(logits < kth, -std::numeric_limits<float>::infinity());
    }
    auto probs = torch::softmax(logits, 1).to(torch::kCPU);
    auto tokens = torch::multinomial(probs, 1, /*replacement=*/false, generator).squeeze(1).contiguous();
    auto chosen = logp.to(torch::kCPU).gather(1, tokens.unsqueeze(1)).squeeze(1).contiguous();
    const int64_t* tok = tokens.data_ptr<int64_t>();
    const float* v = chosen.data_ptr<float>();

    std::vector<int64_t> keep, next_active, next_prev;
    for (size_t r = 0; r < active.size(); ++r) {
      Hypothesis& h = hyp[active[r]];
      h.log_prob = h.log_prob + v[r];
      if (o.attention) h.attention.push_back(attention_row(attention, r, src_len[active[r]] + 1));
      if (tok[r] == models::kEosId) {
        h.score = normalized_score(h.log_prob, static_cast<int64_t>(h.tokens.size()) + 1, o.length_penalty);
        out[active[r]].push_back(std::move(h));
        continue;
      }
      h.tokens.push_back(tok[r]);
      keep.push_back(static_cast<int64_t>(r));
      next_active.push_back(active[r]);
      next_prev.push_back(tok[r]);
    }
    if (next_active.empty()) break;
    if (next_active.size() != active.size()) state->reorder(torch::tensor(keep, torch::kLong).to(src.device()));
    active = std::move(next_active);
    prev = torch::tensor(next_prev, torch::kLong).to(src.device());
  }
  return out;
}

}  // namespace parla::decode

#include "decode/single_path_search.h"

#include <torch/torch.h>

#include "decode/length_penalty.h"
#include "decode/step_constraints.h"

namespace parla::decode {

std::vector<NBestList> single_path_search(models::Seq2SeqModel& model, const torch::Tensor& src,
                                          const SearchOptions& o, const TokenChooser& choose) {
  torch::NoGradGuard no_grad;
  const int64_t batch = src.size(0);
  const auto src_len = source_lengths(src);
  std::vector<int64_t> limit(batch);
  for (int64_t b = 0; b < batch; ++b) limit[b] = max_output_length(o, src_len[b], model.max_positions());

  std::vector<NBestList> out(batch);
  std::vector<Hypothesis> hyp(batch);
  std::vector<int64_t> active(batch);  // original row of each state row
  for (int64_t b = 0; b < batch; ++b) active[b] = b;
  auto state = model.start(src);
  auto prev = torch::full({batch}, models::kBosId, torch::dtype(torch::kLong).device(src.device()));

  for (int64_t step = 0; !active.empty(); ++step) {
    torch::Tensor attention;
    auto logp = model.step(prev, *state, o.attention ? &attention : nullptr).to(torch::kFloat);
    std::vector<int64_t> row_limit(active.size());
    for (size_t r = 0; r < active.size(); ++r) row_limit[r] = limit[active[r]];
    constrain_step(logp, step, row_limit, o.min_length);
    auto [tokens, values] = choose(logp);
    const float* v = values.data_ptr<float>();
    const int64_t* tok = tokens.data_ptr<int64_t>();

    std::vector<int64_t> keep, next_active, next_prev;
    for (size_t r = 0; r < active.size(); ++r) {
      Hypothesis& h = hyp[active[r]];
      // Same float arithmetic as beam search (running score + step log-prob), so beam 1 matches greedy exactly.
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

#include "decode/single_path_search.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include <torch/torch.h>

#include "decode/between_steps.h"
#include "decode/length_penalty.h"
#include "decode/search_shortlist.h"
#include "decode/step_constraints.h"
#include "models/output_shortlist.h"

namespace parla::decode {

std::vector<NBestList> single_path_search(models::Seq2SeqModel& model, const torch::Tensor& src,
                                          const SearchOptions& o, const TokenChooser& choose,
                                          const LogitsChooser& from_logits) {
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
  if (batch > 0) state->expect_steps(*std::max_element(limit.begin(), limit.end()) + 1);
  models::OutputShortlist shortlist;  // with o.shortlist: vocabularies[b] is sentence b's
  if (o.shortlist) {
    require_shortlist_support(model);
    shortlist.set_vocabularies(sentence_vocabularies(*o.shortlist, src), model.vocab_size());
    state->shortlist = &shortlist;
  }
  torch::Tensor prev = torch::full({batch}, model.start_id(), torch::dtype(torch::kLong).device(src.device()));
  const bool by_logits = from_logits && !o.scores && !o.attention && !o.shortlist && o.target_prefix.empty() &&
                         src.device().is_cpu() &&
                         model.has_step_logits(*state);

  for (int64_t step = 0; !active.empty(); ++step) {
    if (step > 0) between_steps();
    torch::Tensor attention;
    if (o.shortlist) shortlist.row_vocabulary.assign(active.begin(), active.end());
    std::vector<int64_t> row_limit(active.size());
    for (size_t r = 0; r < active.size(); ++r) row_limit[r] = limit[active[r]];
    const int64_t N = static_cast<int64_t>(active.size());
    torch::Tensor tokens, host;
    if (by_logits) {
      tokens = from_logits(model.step_logits(prev, *state).to(torch::kFloat).contiguous(), step, row_limit);
      host = torch::cat({tokens, torch::full({N}, std::nanf(""), torch::kFloat).view(torch::kInt).to(torch::kLong)});
    } else {
      auto logp = model.step(prev, *state, o.attention ? &attention : nullptr).to(torch::kFloat);
      constrain_step(logp, step, row_limit, o.min_length, model.start_id(), o.target_prefix);
      torch::Tensor values;
      std::tie(tokens, values) = choose(logp);
      tokens = tokens.to(torch::kLong);
      // One transfer per step: the float log-probs travel bit for bit inside int64s next to the tokens.
      host = torch::cat({tokens, values.to(torch::kFloat).contiguous().view(torch::kInt).to(torch::kLong)})
                 .to(torch::kCPU)
                 .contiguous();
    }
    const int64_t* tok = host.data_ptr<int64_t>();
    const int64_t* v_bits = tok + N;
    if (o.attention) attention = attention.to(torch::kCPU, torch::kFloat).contiguous();

    std::vector<int64_t> keep, next_active;
    for (size_t r = 0; r < active.size(); ++r) {
      Hypothesis& h = hyp[active[r]];
      const auto bits = static_cast<int32_t>(v_bits[r]);
      float v;
      std::memcpy(&v, &bits, sizeof v);
      // Same float arithmetic as beam search (running score + step log-prob), so beam 1 matches greedy exactly.
      h.log_prob = h.log_prob + v;
      if (o.attention) h.attention.push_back(attention_row(attention, r, src_len[active[r]] + 1));
      if (tok[r] == parla::kEosId) {
        h.score = normalized_score(h.log_prob, static_cast<int64_t>(h.tokens.size()) + 1, o.length_penalty);
        out[active[r]].push_back(std::move(h));
        continue;
      }
      h.tokens.push_back(tok[r]);
      keep.push_back(static_cast<int64_t>(r));
      next_active.push_back(active[r]);
    }
    if (next_active.empty()) break;
    // The chosen tokens are already on the device: the next input is them, less the finished rows.
    prev = tokens;
    if (next_active.size() != active.size()) {
      auto rows = torch::tensor(keep, torch::kLong).to(tokens.device());
      state->reorder(rows);
      prev = tokens.index_select(0, rows);
    }
    active = std::move(next_active);
  }
  return out;
}

}  // namespace parla::decode

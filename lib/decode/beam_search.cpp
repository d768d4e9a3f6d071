#include "decode/beam_search.h"

#include <algorithm>
#include <limits>

#include <torch/torch.h>

#include "core/error.h"
#include "decode/beam_candidates.h"
#include "decode/beam_candidates_device.h"
#include "decode/length_penalty.h"
#include "decode/step_constraints.h"

namespace parla::decode {
namespace {

struct Live {
  std::vector<int64_t> tokens;
  float log_prob;
  std::vector<std::vector<float>> attention;
};

bool better(const Hypothesis& a, const Hypothesis& b) {
  if (a.score != b.score) return a.score > b.score;
  return a.tokens < b.tokens;
}

}  // namespace

std::vector<NBestList> beam_search(models::Seq2SeqModel& model, const torch::Tensor& src, const SearchOptions& o) {
  if (o.beam_size < 1) throw UsageError("beam size must be at least 1");
  torch::NoGradGuard no_grad;
  const float ninf = -std::numeric_limits<float>::infinity();
  const int64_t batch = src.size(0), K = o.beam_size, V = model.vocab_size();
  const int64_t n_best = std::max<int64_t>(1, std::min<int64_t>(o.n_best, K));
  const auto device = src.device();
  const auto src_len = source_lengths(src);
  std::vector<int64_t> limit(batch);
  for (int64_t b = 0; b < batch; ++b) limit[b] = max_output_length(o, src_len[b], model.max_positions());

  std::vector<std::vector<Hypothesis>> finished(batch);
  std::vector<int64_t> active(batch);  // original sentence of each block of K state rows
  for (int64_t b = 0; b < batch; ++b) active[b] = b;
  // K rows per sentence; only the first is live at the start, the others score -inf so that the first step
  // does not expand K copies of the same prefix.
  std::vector<Live> rows(batch * K);
  for (int64_t i = 0; i < batch * K; ++i) rows[i].log_prob = i % K == 0 ? 0.f : ninf;

  auto state = model.start(src);
  state->reorder_beams(torch::arange(batch, torch::dtype(torch::kLong).device(device)).repeat_interleave(K), {}, K);
  auto prev = torch::full({batch * K}, models::kBosId, torch::dtype(torch::kLong).device(device));
  const int64_t candidates = std::min<int64_t>(2 * K, K * V);

  for (int64_t step = 0; !active.empty(); ++step) {
    const int64_t A = static_cast<int64_t>(active.size());
    torch::Tensor attention;
    auto logp = model.step(prev, *state, o.attention ? &attention : nullptr).to(torch::kFloat);
    std::vector<int64_t> row_limit(A * K);
    std::vector<float> row_score(A * K);
    for (int64_t r = 0; r < A * K; ++r) {
      row_limit[r] = limit[active[r / K]];
      row_score[r] = rows[r].log_prob;
    }
    constrain_step(logp, step, row_limit, o.min_length);
    // Off the CPU, only the [A, 2K] result comes to the host, not the [A * K, V] log-probabilities.
    const auto top = o.device_candidates || !logp.device().is_cpu()
                         ? best_candidates_tensor(logp, torch::from_blob(row_score.data(), {A * K}).to(logp.device()),
                                                  K, candidates)
                         : best_candidates(logp, row_score, K, candidates);
    // Alignments: the step's attention comes to the host once, not one row per hypothesis.
    if (o.attention) attention = attention.to(torch::kCPU, torch::kFloat).contiguous();

    std::vector<Live> next_rows;
    std::vector<int64_t> next_active, next_groups, reorder, next_prev;
    for (int64_t a = 0; a < A; ++a) {
      const int64_t sent = active[a];
      const auto& cand = top[a];
      std::vector<Live> live;
      std::vector<int64_t> live_parent, live_token;
      for (int64_t j = 0; j < static_cast<int64_t>(cand.size()) && static_cast<int64_t>(live.size()) < K; ++j) {
        const float value = cand[j].score;
        const int64_t beam = cand[j].index / V, token = cand[j].index % V;
        const int64_t parent = a * K + beam;
        const Live& p = rows[parent];
        if (token == models::kEosId) {
          if (j >= K) continue;
          Hypothesis h;
          h.tokens = p.tokens;
          h.log_prob = value;
          h.score = normalized_score(value, static_cast<int64_t>(p.tokens.size()) + 1, o.length_penalty);
          if (o.attention) {
            h.attention = p.attention;
            h.attention.push_back(attention_row(attention, parent, src_len[sent] + 1));
          }
          finished[sent].push_back(std::move(h));
          continue;
        }
        Live l;
        l.tokens = p.tokens;
        l.tokens.push_back(token);
        l.log_prob = value;
        if (o.attention) {
          l.attention = p.attention;
          l.attention.push_back(attention_row(attention, parent, src_len[sent] + 1));
        }
        live.push_back(std::move(l));
        live_parent.push_back(parent);
        live_token.push_back(token);
      }

      auto& fin = finished[sent];
      std::sort(fin.begin(), fin.end(), better);
      bool done = live.empty() || step + 1 > limit[sent] || static_cast<int64_t>(fin.size()) >= K;
      if (!done && static_cast<int64_t>(fin.size()) >= n_best) {
        // Live hypotheses are in descending log-prob order; live[0] bounds every continuation.
        float bound = normalized_score(live[0].log_prob, limit[sent] + 1, o.length_penalty);
        done = bound <= fin[n_best - 1].score;
      }
      if (done) {
        if (static_cast<int64_t>(fin.size()) > n_best) fin.resize(n_best);
        continue;
      }
      next_active.push_back(sent);
      next_groups.push_back(a);
      for (int64_t k = 0; k < K; ++k) {
        if (k < static_cast<int64_t>(live.size())) {
          reorder.push_back(live_parent[k]);
          next_prev.push_back(live_token[k]);
          next_rows.push_back(std::move(live[k]));
        } else {  // fewer live candidates than the beam (tiny vocabularies): a dead row
          reorder.push_back(a * K);
          next_prev.push_back(models::kEosId);
          Live dead;
          dead.log_prob = ninf;
          next_rows.push_back(std::move(dead));
        }
      }
    }
    if (next_active.empty()) break;
    // Sentences leave the batch only when one finishes; until then the per-sentence state stays where it is.
    // The reorder, the next tokens and the surviving sentences go to the device in one transfer.
    const int64_t R = static_cast<int64_t>(reorder.size());
    const bool shrink = static_cast<int64_t>(next_active.size()) != A;
    reorder.insert(reorder.end(), next_prev.begin(), next_prev.end());
    if (shrink) reorder.insert(reorder.end(), next_groups.begin(), next_groups.end());
    auto packed = torch::tensor(reorder, torch::kLong).to(device);
    torch::Tensor groups;
    if (shrink) groups = packed.narrow(0, 2 * R, static_cast<int64_t>(next_groups.size()));
    state->reorder_beams(packed.narrow(0, 0, R), groups, K);
    prev = packed.narrow(0, R, R);
    rows = std::move(next_rows);
    active = std::move(next_active);
  }

  std::vector<NBestList> out(batch);
  for (int64_t b = 0; b < batch; ++b) {
    auto& fin = finished[b];
    std::sort(fin.begin(), fin.end(), better);
    if (static_cast<int64_t>(fin.size()) > n_best) fin.resize(n_best);
    out[b] = std::move(fin);
  }
  return out;
}

}  // namespace parla::decode

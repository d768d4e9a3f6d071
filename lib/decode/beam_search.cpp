#include "decode/beam_search.h"

#include <algorithm>
#include <limits>

#include <torch/torch.h>

#include "core/error.h"
#include "decode/beam_candidates.h"
#include "decode/beam_candidates_device.h"
#include "decode/between_steps.h"
#include "decode/length_penalty.h"
#include "decode/search_shortlist.h"
#include "decode/step_constraints.h"
#include "kernels/log_softmax.h"
#include "nn/log_softmax.h"

namespace parla::decode {
namespace {

bool better(const Hypothesis& a, const Hypothesis& b) {
  if (a.score != b.score) return a.score > b.score;
  return a.tokens < b.tokens;
}

}  // namespace

BeamSearch::BeamSearch(models::Seq2SeqModel& model, const SearchOptions& o) : model_(model), o_(o) {
  if (o.beam_size < 1) throw UsageError("beam size must be at least 1");
  K_ = o.beam_size;
  V_ = model.vocab_size();
  n_best_ = std::max<int64_t>(1, std::min<int64_t>(o.n_best, K_));
  candidates_ = std::min<int64_t>(2 * K_, K_ * V_);
  if (o.shortlist) require_shortlist_support(model);
}

BeamSearch::~BeamSearch() = default;

void BeamSearch::add(const torch::Tensor& src, const std::vector<int64_t>& ids) {
  torch::NoGradGuard no_grad;
  const int64_t batch = src.size(0);
  TORCH_CHECK(static_cast<int64_t>(ids.size()) == batch, "BeamSearch::add: ", ids.size(), " ids for ", batch,
              " sentences");
  if (batch == 0) return;
  const float ninf = -std::numeric_limits<float>::infinity();
  const auto device = src.device();
  auto state = model_.start(src);
  const auto long_opts = torch::dtype(torch::kLong).device(device);
  if (active_.empty()) {  // a fresh search: the finished sentences' state goes
    // Every hypothesis of a sentence is the same empty prefix until the first step, so that step runs one decoder
    // row per sentence (CTranslate2 and fairseq do the same), the beam's rows come from its candidates.
    state_ = std::move(state);
    prev_ = torch::full({batch}, model_.start_id(), long_opts);
    first_step_single_ = true;
    rows_.clear();
    steps_ = 0;
  } else {
    // K rows per sentence; only the first is live at the start, the others score -inf so that the first step
    // does not expand K copies of the same prefix.
    expand_first_step();
    state->reorder_beams(torch::arange(batch, long_opts).repeat_interleave(K_), {}, K_);
    if (!state_->append(*state))
      throw UsageError("this model's decoder state cannot take sentences into a running search");
    prev_ = torch::cat({prev_, torch::full({batch * K_}, model_.start_id(), long_opts)});
  }
  const auto src_len = source_lengths(src);
  std::vector<std::vector<int64_t>> vocabularies;
  if (o_.shortlist) vocabularies = sentence_vocabularies(*o_.shortlist, src);
  int64_t most_steps = 0;
  for (int64_t b = 0; b < batch; ++b) {
    active_.push_back({ids[b], max_output_length(o_, src_len[b], model_.max_positions()), src_len[b], steps_, {},
                       o_.shortlist ? std::move(vocabularies[b]) : std::vector<int64_t>{}});
    most_steps = std::max(most_steps, active_.back().limit + 1);
    for (int64_t k = 0; k < K_; ++k) rows_.push_back({{}, k == 0 ? 0.f : ninf, {}});
  }
  state_->expect_steps(most_steps);
  if (o_.shortlist) {
    // The columns become the union of the sentences in the search now (sentences that left no longer count).
    std::vector<std::vector<int64_t>> now;
    for (auto& sent : active_) {
      sent.slot = static_cast<int32_t>(now.size());
      now.push_back(sent.vocabulary);
    }
    shortlist_.set_vocabularies(now, V_);
    state_->shortlist = &shortlist_;
  }
}

// This step's best candidates of every sentence (the model's step, the constraints, the top 2K per sentence), and
// with alignments its attention on the host; P decoder rows per sentence.
std::vector<std::vector<Candidate>> BeamSearch::best_of_step(int64_t P, torch::Tensor& attention) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const int64_t A = static_cast<int64_t>(active_.size()), K = K_, V = V_, N = A * P;
  const auto device = prev_.device();
  if (o_.shortlist) {
    shortlist_.row_vocabulary.resize(N);
    for (int64_t r = 0; r < N; ++r) shortlist_.row_vocabulary[r] = active_[r / P].slot;
  }
  std::vector<int64_t> row_limit(N), row_step;
  std::vector<float> row_score(N);
  bool same_step = true;
  for (int64_t r = 0; r < N; ++r) {
    row_limit[r] = active_[r / P].limit;
    row_score[r] = rows_[(r / P) * K + r % P].log_prob;
    same_step = same_step && active_[r / P].joined == active_[0].joined;
  }
  // On the CPU the candidates come straight from the logits and one log-sum-exp per live row (nn/log_softmax.h):
  // the log-probabilities the step would have written, never written. A row at its length limit (EOS forced,
  // keeping its log-probability) is normalised in place first, as the constraints read it.
  torch::Tensor logp;
  std::vector<float> row_shift;
  const bool from_logits = !o_.attention && !o_.device_candidates && device.is_cpu() && model_.has_step_logits(*state_);
  if (from_logits) {
    logp = model_.step_logits(prev_, *state_).to(torch::kFloat).contiguous();
    std::vector<bool> live(static_cast<size_t>(N));
    for (int64_t r = 0; r < N; ++r) live[r] = row_score[r] > ninf;
    row_shift = nn::row_log_sum_exp(logp, live);
    float* x = logp.data_ptr<float>();
    for (int64_t r = 0; r < N; ++r)
      if (live[r] && steps_ - active_[r / P].joined >= row_limit[r]) {
        kernels::subtract(x + r * V, V, row_shift[r], x + r * V);
        row_shift[r] = 0.0f;
      }
  } else {
    logp = model_.step(prev_, *state_, o_.attention ? &attention : nullptr).to(torch::kFloat);
  }
  if (same_step) {
    constrain_step(logp, steps_ - active_[0].joined, row_limit, o_.min_length, model_.start_id(), o_.target_prefix);
  } else {
    for (int64_t r = 0; r < N; ++r) row_step.push_back(steps_ - active_[r / P].joined);
    constrain_step(logp, row_step, row_limit, o_.min_length, model_.start_id(), o_.target_prefix);
  }
  if (from_logits && !o_.target_prefix.empty())  // a forced row now holds log-probabilities (0 and -inf)
    for (int64_t r = 0; r < N; ++r) {
      const int64_t step = steps_ - active_[r / P].joined;
      if (step < static_cast<int64_t>(o_.target_prefix.size()) && step < row_limit[r]) row_shift[r] = 0.0f;
    }
  // Off the CPU, only the [A, 2K] result comes to the host, not the [A * K, V] log-probabilities.
  auto top = o_.device_candidates || !logp.device().is_cpu()
                       ? best_candidates_tensor(logp, torch::from_blob(row_score.data(), {N}).to(logp.device()),
                                                P, candidates_)
                       : best_candidates(logp, row_score, P, candidates_, row_shift);
  // Alignments: the step's attention comes to the host once, not one row per hypothesis.
  if (o_.attention) attention = attention.to(torch::kCPU, torch::kFloat).contiguous();
  return top;
}

std::vector<std::pair<int64_t, NBestList>> BeamSearch::step() {
  std::vector<std::pair<int64_t, NBestList>> done_sentences;
  if (active_.empty()) return done_sentences;
  torch::NoGradGuard no_grad;
  const float ninf = -std::numeric_limits<float>::infinity();
  const int64_t A = static_cast<int64_t>(active_.size()), K = K_, V = V_;
  // Decoder rows per sentence in this step: K, or 1 at the first step of a fresh search (add()). Row r of the step
  // is hypothesis rows_[(r / P) * K + r % P].
  const int64_t P = first_step_single_ ? 1 : K;
  const auto device = prev_.device();
  torch::Tensor attention;
  const auto top = best_of_step(P, attention);

  std::vector<Live> next_rows;
  std::vector<Sentence> next_active;
  std::vector<int64_t> next_groups, reorder, next_prev;
  for (int64_t a = 0; a < A; ++a) {
    Sentence& sent = active_[a];
    const int64_t step = steps_ - sent.joined;
    const auto& cand = top[a];
    std::vector<Live> live;
    std::vector<int64_t> live_parent, live_token;
    for (int64_t j = 0; j < static_cast<int64_t>(cand.size()) && static_cast<int64_t>(live.size()) < K; ++j) {
      const float value = cand[j].score;
      const int64_t beam = cand[j].index / V, token = cand[j].index % V;
      const int64_t parent = a * P + beam;  // the decoder row; its hypothesis is rows_[a * K + beam]
      const Live& p = rows_[a * K + beam];
      if (token == parla::kEosId) {
        if (j >= K) continue;
        Hypothesis h;
        h.tokens = p.tokens;
        h.log_prob = value;
        h.score = normalized_score(value, static_cast<int64_t>(p.tokens.size()) + 1, o_.length_penalty);
        if (o_.attention) {
          h.attention = p.attention;
          h.attention.push_back(attention_row(attention, parent, sent.source_length + 1));
        }
        sent.finished.push_back(std::move(h));
        continue;
      }
      Live l;
      l.tokens = p.tokens;
      l.tokens.push_back(token);
      l.log_prob = value;
      if (o_.attention) {
        l.attention = p.attention;
        l.attention.push_back(attention_row(attention, parent, sent.source_length + 1));
      }
      live.push_back(std::move(l));
      live_parent.push_back(parent);
      live_token.push_back(token);
    }

    auto& fin = sent.finished;
    std::sort(fin.begin(), fin.end(), better);
    bool done = live.empty() || step + 1 > sent.limit || static_cast<int64_t>(fin.size()) >= K;
    if (!done && static_cast<int64_t>(fin.size()) >= n_best_) {
      // Live hypotheses are in descending log-prob order; live[0] bounds every continuation.
      float bound = normalized_score(live[0].log_prob, sent.limit + 1, o_.length_penalty);
      done = bound <= fin[n_best_ - 1].score;
    }
    if (done) {
      if (static_cast<int64_t>(fin.size()) > n_best_) fin.resize(n_best_);
      done_sentences.emplace_back(sent.id, std::move(fin));
      continue;
    }
    next_groups.push_back(a);
    for (int64_t k = 0; k < K; ++k) {
      if (k < static_cast<int64_t>(live.size())) {
        reorder.push_back(live_parent[k]);
        next_prev.push_back(live_token[k]);
        next_rows.push_back(std::move(live[k]));
      } else {  // fewer live candidates than the beam (tiny vocabularies): a dead row
        reorder.push_back(a * P);
        next_prev.push_back(parla::kEosId);
        Live dead;
        dead.log_prob = ninf;
        next_rows.push_back(std::move(dead));
      }
    }
    next_active.push_back(std::move(sent));
  }
  ++steps_;
  first_step_single_ = false;  // the reorder below makes K rows per sentence
  active_ = std::move(next_active);
  rows_ = std::move(next_rows);
  if (active_.empty()) {  // nothing left to reorder: the next add() starts afresh
    state_.reset();
    prev_ = torch::Tensor();
    return done_sentences;
  }
  // Sentences leave the batch only when one finishes; until then the per-sentence state stays where it is.
  // The reorder, the next tokens and the surviving sentences go to the device in one transfer.
  const int64_t R = static_cast<int64_t>(reorder.size());
  const bool shrink = static_cast<int64_t>(next_groups.size()) != A;
  reorder.insert(reorder.end(), next_prev.begin(), next_prev.end());
  if (shrink) reorder.insert(reorder.end(), next_groups.begin(), next_groups.end());
  auto packed = torch::tensor(reorder, torch::kLong).to(device);
  torch::Tensor groups;
  if (shrink) groups = packed.narrow(0, 2 * R, static_cast<int64_t>(next_groups.size()));
  state_->reorder_beams(packed.narrow(0, 0, R), groups, K);
  prev_ = packed.narrow(0, R, R);
  return done_sentences;
}

void BeamSearch::remove(const std::vector<int64_t>& ids) {
  auto leaving = [&](const Sentence& s) { return std::find(ids.begin(), ids.end(), s.id) != ids.end(); };
  if (std::none_of(active_.begin(), active_.end(), leaving)) return;
  torch::NoGradGuard no_grad;
  expand_first_step();
  std::vector<int64_t> groups, rows;
  std::vector<Sentence> kept;
  std::vector<Live> kept_rows;
  for (int64_t a = 0; a < static_cast<int64_t>(active_.size()); ++a) {
    if (leaving(active_[a])) continue;
    groups.push_back(a);
    for (int64_t k = 0; k < K_; ++k) {
      rows.push_back(a * K_ + k);
      kept_rows.push_back(std::move(rows_[a * K_ + k]));
    }
    kept.push_back(std::move(active_[a]));
  }
  active_ = std::move(kept);
  rows_ = std::move(kept_rows);
  if (active_.empty()) {
    state_.reset();
    prev_ = torch::Tensor();
    return;
  }
  const auto device = prev_.device();
  auto row_index = torch::tensor(rows, torch::kLong).to(device);
  state_->reorder_beams(row_index, torch::tensor(groups, torch::kLong).to(device), K_);
  prev_ = prev_.index_select(0, row_index);
}

void BeamSearch::expand_first_step() {
  if (!first_step_single_) return;
  first_step_single_ = false;
  const auto rows = torch::arange(static_cast<int64_t>(active_.size()), prev_.options()).repeat_interleave(K_);
  state_->reorder_beams(rows, {}, K_);
  prev_ = prev_.index_select(0, rows);
}

std::vector<NBestList> beam_search(models::Seq2SeqModel& model, const torch::Tensor& src, const SearchOptions& o) {
  BeamSearch search(model, o);
  const int64_t batch = src.size(0);
  std::vector<int64_t> ids(batch);
  for (int64_t b = 0; b < batch; ++b) ids[b] = b;
  search.add(src, ids);
  std::vector<NBestList> out(batch);
  for (bool first = true; search.size() > 0; first = false) {
    if (!first) between_steps();
    for (auto& [id, best] : search.step()) out[id] = std::move(best);
  }
  return out;
}

}  // namespace parla::decode

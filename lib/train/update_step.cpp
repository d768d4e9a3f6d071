#include "train/update_step.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <string>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "runtime/runtime_device.h"
#include "models/seq2seq.h"
#include "train/multi_tensor_update.h"
#include "train/shutdown_signal.h"

namespace parla::train {

data::Batch batch_rows(const data::Batch& b, int64_t start, int64_t n) {
  auto rows = [&](const torch::Tensor& x) { return x.defined() ? x.narrow(0, start, n).contiguous() : x; };
  // Width of the longest row: the last column holding a non-pad token in any row (padding is at the end).
  auto width = [](const torch::Tensor& x) {
    auto used = x.ne(parla::kPadId).any(0).nonzero();
    return used.numel() > 0 ? used.max().item<int64_t>() + 1 : x.size(1);
  };
  data::Batch o;
  o.sentences = n;
  o.src = rows(b.src);
  o.segments = rows(b.segments);
  o.mlm_labels = rows(b.mlm_labels);
  o.nsp_labels = rows(b.nsp_labels);
  o.tgt_in = rows(b.tgt_in);
  o.tgt_out = rows(b.tgt_out);
  if (o.src.defined() && o.src.dim() == 2) {
    const int64_t s = width(o.src);
    for (auto* x : {&o.src, &o.segments, &o.mlm_labels})
      if (x->defined()) *x = x->narrow(1, 0, s).contiguous();
    o.src_tokens = o.src.ne(parla::kPadId).sum().item<int64_t>();
  }
  if (o.tgt_out.defined() && o.tgt_out.dim() == 2) {
    const int64_t t = std::max(width(o.tgt_in), width(o.tgt_out));
    o.tgt_in = o.tgt_in.narrow(1, 0, t).contiguous();
    o.tgt_out = o.tgt_out.narrow(1, 0, t).contiguous();
    o.tgt_tokens = o.tgt_out.ne(parla::kPadId).sum().item<int64_t>();
  }
  return o;
}

UpdateStep::UpdateStep(const TrainingConfig& config, Task& task, Learner& learner, DataParallel& dp,
                       std::shared_ptr<UpdateFaults> faults)
    : t_(config),
      task_(task),
      learner_(learner),
      dp_(dp),
      device_(learner.device()),
      faults_(faults ? std::move(faults) : std::make_shared<UpdateFaults>()),
      params_(learner.model().parameters()) {}

// Forward and backward of one batch; returns its figures (each term's loss sum, then the nll sum: float64
// [terms + 1], detached, on the device). `in_backward` turns true once backward() may have touched .grad.
torch::Tensor UpdateStep::train_on_batch(const data::Batch& cpu_batch, const std::vector<double>& global,
                                         bool& in_backward) {
  const size_t n_terms = task_.num_terms();
  faults_->before_forward(cpu_batch);
  auto b = cpu_batch.to(device_);
  torch::Tensor total;
  std::vector<torch::Tensor> figures;
  {
    RECORD_USER_SCOPE(runtime::kForwardScope);
    // Mixed precision (Micikevicius et al. 2018, Sec. 3): autocast runs the forward pass and the loss in
    // bf16/fp16 where that is safe; the parameters (fp32 master weights) are cast per use, so the
    // backward pass, outside the scope, accumulates fp32 gradients for an fp32 optimizer.
    runtime::AutocastScope autocast(device_, learner_.precision());
    auto terms = task_.loss(b);
    faults_->after_loss(update_index_, terms);
    auto zero = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
    for (size_t i = 0; i < n_terms; ++i) {
      if (i >= terms.sums.size() || global[i] <= 0) {
        figures.push_back(zero);
        continue;
      }
      auto part = terms.sums[i] / global[i];
      total = total.defined() ? total + part : part;
      // float64 as the former host sums (item<double>): the same additions in the same order, exactly.
      figures.push_back(terms.sums[i].detach().to(torch::kFloat64));
    }
    figures.push_back(terms.nll.defined() ? terms.nll.detach().to(torch::kFloat64) : zero);
  }
  if (total.defined()) {
    // Loss scaling (ibid., Sec. 3.2): shifts small fp16 gradients into the representable range.
    if (learner_.loss_scaling()) total = total * learner_.scaler().scale();
    in_backward = true;
    total.backward();
    faults_->after_backward(cpu_batch);
  }
  return torch::stack(figures);
}

// This rank's batches of one update, their gradients summed into .grad and their figures into `stats`.
//
// Out of memory on a batch: it is retried as two halves by sentences (recursively), normalised by the same
// global counts, so the update is the same (up to summation order, and dropout masks drawn anew). Only a
// one-sentence batch that does not fit is an error. The gradient must stay exact: an allocation that fails
// before backward() leaves .grad untouched, but one that fails during it may have added part of the batch's
// gradient (autograd accumulates parameter by parameter as it goes). Saving .grad before every backward would
// cost a gradient-sized copy per batch, the memory we are short of; instead, on a failure inside backward,
// the update starts over: .grad is dropped (freeing memory too) and the batches already done are redone
// before the halves. Rare (a retried batch then fits), and it needs no collective: the counts were reduced
// before, the gradients are reduced after.
void UpdateStep::train_batches(const std::vector<data::Batch>& batches, const std::vector<double>& global,
                               torch::Tensor& stats, const TrainingState& state, int64_t& oom_retries) {
  std::deque<data::Batch> todo(batches.begin(), batches.end());
  std::vector<data::Batch> done;
  while (!todo.empty()) {
    bool in_backward = false;
    bool oom = false;
    try {
      stats.add_(train_on_batch(todo.front(), global, in_backward));
    } catch (const c10::Error& e) {
      if (!runtime::is_out_of_memory(e)) throw;
      oom = true;
    } catch (const std::bad_alloc&) {
      oom = true;
    }
    if (!oom) {
      done.push_back(std::move(todo.front()));
      todo.pop_front();
      continue;
    }
    data::Batch failed = std::move(todo.front());
    todo.pop_front();
    if (failed.sentences <= 1)
      throw DataError("out of memory at step " + std::to_string(state.step + 1) +
                      " on a single sentence: lower training.batch_tokens (now " + std::to_string(t_.batch_tokens) +
                      ") and training.max_len, and raise training.update_freq to keep the effective batch");
    ++oom_retries;
    const int64_t half = (failed.sentences + 1) / 2;
    todo.push_front(batch_rows(failed, half, failed.sentences - half));
    todo.push_front(batch_rows(failed, 0, half));
    if (in_backward) {
      learner_.clear_gradients();
      stats.zero_();
      for (auto it = done.rbegin(); it != done.rend(); ++it) todo.push_front(std::move(*it));
      done.clear();
    }
    spdlog::warn("step {}: out of memory on a batch of {} sentences{}: retrying it as two halves",
                 state.step + 1, failed.sentences, in_backward ? " during backward (the update starts over)" : "");
  }
}

std::vector<torch::Tensor> UpdateStep::gradients() const {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params_)
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

AccumulatedUpdate UpdateStep::accumulate(const std::vector<data::Batch>& batches, const TrainingState& state,
                                         int64_t& oom_retries) {
  // Item counts per term (known before the forward pass), the shutdown flag and the tokens, summed over
  // ranks in one collective.
  const size_t n_terms = task_.num_terms();
  std::vector<double> counts(n_terms, 0.0);
  int64_t local_tokens = 0;
  for (auto& b : batches) {
    auto c = task_.counts(b);
    for (size_t i = 0; i < n_terms; ++i) counts[i] += c[i];
    local_tokens += Task::batch_tokens(b);
  }
  faults_->before_update(update_index_);
  std::vector<double> to_reduce = counts;
  to_reduce.push_back(shutdown_requested() != 0 ? 1.0 : 0.0);
  to_reduce.push_back(static_cast<double>(local_tokens));
  AccumulatedUpdate u;
  u.global = dp_.all_reduce_sum(to_reduce);
  u.stop_votes = u.global[n_terms] > 0;
  u.tokens = u.global[n_terms + 1];

  // The update's figures stay on the device (float64: each term's loss sum, then the nll sum) until a
  // progress line reads them; the only per-update read is the finite flags of apply().
  u.stats = torch::zeros({static_cast<int64_t>(n_terms) + 1},
                         torch::TensorOptions().dtype(torch::kFloat64).device(device_));
  train_batches(batches, u.global, u.stats, state, oom_retries);
  return u;
}

UpdateOutcome UpdateStep::apply(const AccumulatedUpdate& u, TrainingState& state, HostReads& reads) {
  RECORD_USER_SCOPE(runtime::kUpdateScope);
  const size_t n_terms = task_.num_terms();
  torch::Tensor stats = u.stats;
  dp_.all_reduce_gradients(learner_.model());
  dp_.average_running_statistics(learner_.model());
  const auto grads = gradients();
  if (learner_.loss_scaling()) {
    // Unscale before clipping, so clip_norm and the reported norm refer to the true gradient. The scale is a
    // power of two: exact. Overflow shows as a non-finite norm below, in the same read as the loss's flag.
    unscale_gradients(grads, 1.0 / learner_.scaler().scale());
  }
  dp_.all_reduce_sum_(stats);

  UpdateOutcome out;
  // Gradient norm over all parameters (clipped when clip_norm > 0).
  out.grad_norm = grads.empty() ? torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(device_))
                                : clip_grad_norm(grads, t_.clip_norm);
  ++update_index_;

  // The one host read of the update: is the loss finite (the terms with items), is the gradient norm finite.
  std::vector<int64_t> used;
  for (size_t i = 0; i < n_terms; ++i)
    if (u.global[i] > 0) used.push_back(static_cast<int64_t>(i));
  auto loss_finite = used.empty() ? torch::ones({}, torch::TensorOptions().dtype(torch::kBool).device(device_))
                                  : torch::isfinite(stats.index_select(0, torch::tensor(used).to(device_))).all();
  const auto flags = reads(torch::stack({loss_finite, torch::isfinite(out.grad_norm)}));
  const bool loss_ok = flags.data_ptr<bool>()[0];
  const bool norm_ok = flags.data_ptr<bool>()[1];

  out.pending.skipped = true;
  if (learner_.loss_scaling() && loss_ok && !norm_ok) {
    // A finite loss with non-finite gradients: the scale was too high for fp16, not a diverging model. Skip
    // the update and halve the scale; not a bad step (fairseq, GradScaler). The scaler stops the run (a
    // DataError) when the scale underflows.
    learner_.clear_gradients();
    const double was = learner_.scaler().scale();
    learner_.scaler().update(false);
    spdlog::info("step {}: fp16 gradients overflowed at loss scale {:g}: update skipped, scale now {:g} "
                 "({} overflows in total)",
                 state.step + 1, was, learner_.scaler().scale(), learner_.scaler().overflows());
  } else if (!loss_ok || !norm_ok) {
    learner_.clear_gradients();
    ++state.bad_steps;
    ++state.skipped_steps;
    // NaN vs infinite is told apart only here, on the rare skipped update (a second read).
    const bool is_nan = *reads(torch::stack({stats.isnan().any(), out.grad_norm.isnan()}).any()).data_ptr<bool>();
    spdlog::warn("step {}: {} loss or gradient, update skipped ({} in a row, {} in total)", state.step + 1,
                 is_nan ? "NaN" : "infinite", state.bad_steps, state.skipped_steps);
    if (state.bad_steps >= t_.max_bad_steps)
      throw DataError("training diverged: " + std::to_string(state.bad_steps) +
                      " updates in a row had a NaN/inf loss (training.max_bad_steps); lower training.lr, "
                      "raise training.warmup_steps or set training.clip_norm, and resume from the last "
                      "checkpoint");
  } else {
    state.bad_steps = 0;
    if (learner_.loss_scaling()) learner_.scaler().update(true);
    learner_.step(state.step + 1);
    ++state.step;
    state.tokens += static_cast<int64_t>(u.tokens);
    out.applied = true;
    out.pending.skipped = false;
    out.pending.stats = stats;
    out.pending.counts.assign(u.global.begin(), u.global.begin() + static_cast<std::ptrdiff_t>(n_terms));
    out.items = u.global[0];
    out.tokens = u.tokens;
  }
  return out;
}

}  // namespace parla::train

#include "train/training_reporter.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <spdlog/spdlog.h>

#include "core/progress.h"

namespace parla::train {

TrainingReporter::TrainingReporter(const TrainingConfig& config, const Task& task, const Learner& learner,
                                   bool master, MetricsLog& metrics, HostReads& reads, Clock::time_point start,
                                   int64_t start_step)
    : t_(config),
      task_(task),
      learner_(learner),
      master_(master),
      metrics_(metrics),
      reads_(reads),
      start_(start),
      start_step_(start_step),
      iv_start_(Clock::now()) {}

void TrainingReporter::training_begins(int64_t parameters, const std::string& device, int world, size_t pairs,
                                       size_t batches) const {
  if (master_)
    spdlog::info("training {} ({} parameters) on {} ({} rank{}): {} pairs, {} batches per epoch",
                 config::name_of(t_.task),
                 parameters, device, world, world > 1 ? "s" : "", pairs, batches);
}

void TrainingReporter::epoch_begins(int64_t epoch, size_t batches) const {
  if (master_) spdlog::info("epoch {} begins ({} batches)", epoch, batches);
}

void TrainingReporter::add(const UpdateOutcome& update) {
  last_grad_norm_ = update.grad_norm;
  pending_.push_back(update.pending);
  if (update.applied) {
    iv_count_ += update.items;
    iv_tokens_ += update.tokens;
  }
}

// Reads the pending figures in one copy and does the host arithmetic the loop did per update before (the same
// operations in the same order, so the losses are bit-identical): per-update losses, interval sums. Returns
// the last gradient norm.
double TrainingReporter::flush() {
  std::vector<torch::Tensor> parts;
  for (const auto& u : pending_)
    if (!u.skipped) parts.push_back(u.stats);
  parts.push_back(last_grad_norm_.defined()
                      ? last_grad_norm_.detach().to(torch::kFloat64).reshape({1})
                      : torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat64).device(learner_.device())));
  auto host = reads_(torch::cat(parts)).contiguous();
  const double* v = host.data_ptr<double>();
  const size_t n_terms = task_.num_terms();
  for (const auto& u : pending_) {
    if (u.skipped) {
      losses_.push_back(std::numeric_limits<double>::quiet_NaN());
      continue;
    }
    double loss = 0;
    for (size_t i = 0; i < n_terms; ++i)
      if (u.counts[i] > 0) loss += v[i] / u.counts[i];
    const double nll = u.counts[0] > 0 ? v[n_terms] / u.counts[0] : 0.0;
    losses_.push_back(loss);
    iv_loss_ += loss * u.counts[0];
    iv_nll_ += nll * u.counts[0];
    v += n_terms + 1;
  }
  pending_.clear();
  return *v;
}

void TrainingReporter::progress(const TrainingState& state) {
  const double grad_norm = flush();
  double secs = std::chrono::duration<double>(Clock::now() - iv_start_).count();
  double mean_loss = iv_loss_ / iv_count_, mean_nll = iv_nll_ / iv_count_;
  double tok_s = secs > 0 ? iv_tokens_ / secs : 0;
  double run_secs = std::chrono::duration<double>(Clock::now() - start_).count();
  double per_step = run_secs / std::max<int64_t>(1, state.step - start_step_);
  double eta = std::numeric_limits<double>::quiet_NaN();
  if (t_.max_steps > 0) eta = per_step * static_cast<double>(t_.max_steps - state.step);
  if (t_.max_time > 0) {
    double left = t_.max_time * 60 - state.elapsed;
    eta = std::isnan(eta) ? left : std::min(eta, left);
  }
  double lr = learner_.schedule()(state.step);
  if (master_) {
    spdlog::info("step {} | epoch {} | loss {:.4f} | ppl {:.2f} | lr {:.3e} | gnorm {:.3f} | {:.0f} tok/s | "
                 "elapsed {}{}{}",
                 state.step, state.epoch, mean_loss, std::exp(mean_nll), lr, grad_norm, tok_s,
                 Progress::format_duration(state.elapsed),
                 std::isnan(eta) ? "" : " | ETA " + Progress::format_duration(eta),
                 learner_.loss_scaling() ? fmt::format(" | loss scale {:g}", learner_.scaler().scale()) : "");
    nlohmann::json record = {{"type", "train"},
                             {"step", state.step},
                             {"epoch", state.epoch},
                             {"loss", mean_loss},
                             {"nll", mean_nll},
                             {"perplexity", std::exp(mean_nll)},
                             {"lr", lr},
                             {"grad_norm", grad_norm},
                             {"tokens_per_second", tok_s},
                             {"elapsed", state.elapsed},
                             {"skipped_steps", state.skipped_steps}};
    if (learner_.loss_scaling()) {
      record["loss_scale"] = learner_.scaler().scale();
      record["overflow_steps"] = learner_.scaler().overflows();
    }
    metrics_.write(record);
  }
  iv_loss_ = iv_nll_ = iv_count_ = iv_tokens_ = 0;
  iv_start_ = Clock::now();
}

void TrainingReporter::finish() {
  if (!pending_.empty()) flush();
}

void TrainingReporter::validation(const TrainingState& state, const ValidationResult& r, const nlohmann::json& rec,
                                  bool improved, double seconds) {
  if (!master_) return;
  metrics_.write(rec);
  std::string bleu = r.bleu >= 0 ? fmt::format(" | bleu {:.2f}", r.bleu) : "";
  spdlog::info("valid | step {} | epoch {} | loss {:.4f} | ppl {:.2f}{} | best {} {:.4f} (step {}){} | {}",
               state.step, state.epoch, r.loss, r.perplexity, bleu, config::name_of(t_.early_stop_metric), state.best,
               state.best_step, improved ? " *" : "", Progress::format_duration(seconds));
}

void TrainingReporter::training_ends(const TrainingState& state, StopReason stop_reason, int signal,
                                     const std::string& save_dir) const {
  if (!master_) return;
  if (stop_reason == StopReason::kSignal)
    spdlog::warn("stopped by signal {} at step {}: saved '{}/checkpoint_last.pt'; continue with --resume", signal,
                 state.step, save_dir);
  else
    spdlog::info("training done ({}): {} steps, epoch {}, {} tokens in {}", config::name_of(stop_reason), state.step,
                 state.epoch, state.tokens, Progress::format_duration(state.elapsed));
}

}  // namespace parla::train

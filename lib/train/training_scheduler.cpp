#include "train/training_scheduler.h"

#include <algorithm>
#include <filesystem>
#include <regex>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/progress.h"

namespace fs = std::filesystem;

namespace parla::train {

StopDecision TrainingScheduler::finished_before_start(const TrainingState& s,
                                                      const std::function<size_t()>& plan_size) const {
  const std::string where =
      fmt::format("step {}, epoch {}, {} trained", s.step, s.epoch, Progress::format_duration(s.elapsed));
  if (max_steps_reached(s))
    return {StopReason::kMaxSteps,
            fmt::format("training.max_steps = {} reached ({}); raise it (--max-steps) to train on", t_.max_steps, where)};
  if (max_time_reached(s))
    return {StopReason::kMaxTime, fmt::format("training.max_time = {:g} minutes reached ({}); raise it (--max-time) to train on",
                                    t_.max_time, where)};
  if (t_.max_epochs > 0 && max_epochs_reached(s, plan_size()))  // the plan is built only when a limit can apply
    return {StopReason::kMaxEpochs, fmt::format("training.max_epochs = {} reached (epoch {} complete; {}); raise it "
                                      "(--max-epochs) to train on",
                                      t_.max_epochs, s.epoch, where)};
  if (patience_exhausted(s))
    return {StopReason::kEarlyStopping, fmt::format("early stopping: {} validations without a better {} (training.patience = "
                                          "{}; best {:.4f} at step {}; {}); raise training.patience to train on",
                                          s.stale_validations, config::name_of(t_.early_stop_metric), t_.patience, s.best, s.best_step,
                                          where)};
  return {};
}

StopReason TrainingScheduler::stop_after_update(const TrainingState& s, bool stop_votes) const {
  if (stop_votes) return StopReason::kSignal;
  if (max_steps_reached(s)) return StopReason::kMaxSteps;
  if (max_time_reached(s)) return StopReason::kMaxTime;
  return StopReason::kNone;
}

double TrainingScheduler::metric_value(const ValidationResult& r) const {
  if (t_.early_stop_metric == ValidationMetric::kBleu) return r.bleu;
  if (t_.early_stop_metric == ValidationMetric::kPerplexity) return r.perplexity;
  return r.loss;
}

ValidationVerdict TrainingScheduler::record_validation(TrainingState& s, const ValidationResult& r) const {
  const double v = metric_value(r);
  const bool lower_is_better = t_.early_stop_metric != ValidationMetric::kBleu;
  const bool improved = !s.has_best || (lower_is_better ? v < s.best : v > s.best);
  if (improved) {
    s.has_best = true;
    s.best = v;
    s.best_step = s.step;
    s.stale_validations = 0;
  } else {
    ++s.stale_validations;
  }
  s.last_valid_step = s.step;
  return {improved, patience_exhausted(s)};
}

void TrainingScheduler::prune_numbered_checkpoints(const std::string& save_dir) const {
  static const std::regex re("checkpoint_([0-9]+)\\.pt");
  std::vector<std::pair<int64_t, fs::path>> found;
  for (const auto& e : fs::directory_iterator(save_dir)) {
    std::smatch m;
    std::string name = e.path().filename().string();
    if (std::regex_match(name, m, re)) found.emplace_back(std::stoll(m[1]), e.path());
  }
  std::sort(found.begin(), found.end());
  while (static_cast<int>(found.size()) > t_.keep_last) {
    std::error_code ec;
    fs::remove(found.front().second, ec);
    found.erase(found.begin());
  }
}

}  // namespace parla::train

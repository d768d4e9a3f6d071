#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <filesystem>
#include <fstream>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/progress.h"
#include "runtime/runtime_device.h"
#include "data/batch_sampler.h"
#include "core/output_file.h"
#include "data/token_dataset.h"
#include "models/checkpoint.h"
#include "train/batch_dump.h"
#include "train/bert_pretraining.h"
#include "train/distributed.h"
#include "train/fine_tuning.h"
#include "train/learner.h"
#include "train/metrics_log.h"
#include "train/shutdown_signal.h"
#include "train/task.h"
#include "train/training_reporter.h"
#include "train/training_scheduler.h"
#include "train/training_state.h"
#include "train/translation_task.h"
#include "train/update_step.h"

namespace fs = std::filesystem;

namespace parla::train {

void check_training_config(const Config& cfg) {
  const auto& t = cfg.training;
  if (cfg.data.dir.empty())
    throw ConfigError("missing data.dir: the parla-preprocess output directory (flag --data DIR)");
  if (t.save_dir.empty())
    throw ConfigError("missing training.save_dir: where checkpoints go (flag --save-dir/-o DIR)");
  if (t.max_steps == 0 && t.max_epochs == 0 && t.max_time == 0 && t.patience == 0)
    throw ConfigError("training would never stop: set training.max_steps, training.max_epochs, training.max_time "
                      "or training.patience (early stopping)");
  if (t.early_stop_metric == ValidationMetric::kBleu && (!t.valid_bleu || t.task != TrainingTask::kTranslation))
    throw ConfigError("training.early_stop_metric 'bleu' needs training.valid_bleu = true and the translation task");
  if (t.task == TrainingTask::kBert && cfg.model.type != ModelType::kBert)
    throw ConfigError("training.task 'bert' needs model.type 'bert' (got '" + std::string(config::name_of(cfg.model.type)) + "')");
  if (t.task == TrainingTask::kTranslation && cfg.model.type == ModelType::kBert)
    throw ConfigError("model.type 'bert' is trained with training.task 'bert' (got 'translation')");
  if (!t.init_encoder_from.empty() && t.task != TrainingTask::kTranslation)
    throw ConfigError("training.init_encoder_from initialises a translation model; training.task is '" +
                      std::string(config::name_of(t.task)) + "'");
  if (!t.init_from.empty() && t.task != TrainingTask::kTranslation)
    throw ConfigError("training.init_from fine-tunes a translation model; training.task is '" + std::string(config::name_of(t.task)) + "'");
  if (!t.init_from.empty() && !t.init_encoder_from.empty())
    throw ConfigError("training.init_from and training.init_encoder_from both initialise the model: give one");
}

std::vector<std::string> model_config_differences(const nlohmann::json& checkpoint, const nlohmann::json& current) {
  std::vector<std::string> out;
  const auto& a = checkpoint.contains("model") ? checkpoint["model"] : nlohmann::json::object();
  const auto& b = current.contains("model") ? current["model"] : nlohmann::json::object();
  std::set<std::string> keys;
  for (auto it = a.begin(); it != a.end(); ++it) keys.insert(it.key());
  for (auto it = b.begin(); it != b.end(); ++it) keys.insert(it.key());
  // A key the checkpoint lacks was added to parla after it was written: the model it built had the default.
  static const nlohmann::json defaults = config::to_json(Config{})["model"];
  for (const auto& k : keys) {
    auto va = a.contains(k) ? a[k] : defaults.contains(k) ? defaults[k] : nlohmann::json();
    auto vb = b.contains(k) ? b[k] : nlohmann::json();
    if (va != vb) out.push_back("model." + k + " (checkpoint " + va.dump() + ", config " + vb.dump() + ")");
  }
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("cannot read '" + path + "'");
  return std::string(std::istreambuf_iterator<char>(in), {});
}


}  // namespace

struct Trainer::Impl {
  Config cfg;
  TrainerOptions opts;
  std::shared_ptr<DataParallel> dp;
  torch::Device device{torch::kCPU};
  data::DatasetInfo info;
  std::unique_ptr<Task> task;
  // The model, its optimizer, schedule, loss scaler, weight average and precision.
  std::unique_ptr<Learner> learner;
  TrainingState state;
  MetricsLog metrics;
  TrainingScheduler scheduler{cfg.training};
  std::string save_dir;
  std::string src_spm, tgt_spm;
  bool master = true;
  // A resumed run whose checkpoint had already reached a stop condition: which (TrainResult::stop_reason) and a
  // sentence for the log; empty while there is training to do.
  StopReason finished_reason = StopReason::kNone;
  std::string finished_detail;

  Impl(const Config& c, TrainerOptions o, std::shared_ptr<DataParallel> d)
      : cfg(c), opts(std::move(o)), dp(std::move(d)) {
    check_training_config(cfg);
    const auto& t = cfg.training;
    if (!dp) dp = DataParallel::from_env(cfg.runtime.device);
    // Rank r of a data-parallel run computes on cuda:LOCAL_RANK; runtime_device decides and refuses what this
    // machine cannot run.
    device = runtime::resolve_device(
        runtime::DeviceRequest{cfg.runtime.device, "runtime.device", dp->world_size(), dp->local_rank()});
    master = dp->is_master();
    save_dir = t.save_dir;

    info = data::read_dataset_info(cfg.data.dir);
    src_spm = read_file_bytes(info.src_spm_path);
    tgt_spm = info.tgt_spm_path == info.src_spm_path ? src_spm : read_file_bytes(info.tgt_spm_path);

    // The same seed gives the same initial weights and dropout masks on every run (and every rank).
    torch::manual_seed(static_cast<uint64_t>(cfg.runtime.seed));
    if (t.task == TrainingTask::kBert) {
      task = std::make_unique<BertPretrainingTask>(cfg, info);
    } else {
      Config task_cfg = cfg;  // data.pad_to_multiple resolved for this device (config.json keeps what was asked)
      task_cfg.data.pad_to_multiple =
          static_cast<int>(runtime::resolve_pad_to_multiple(cfg.data.pad_to_multiple, device));
      task = std::make_unique<TranslationTask>(task_cfg, info);
    }
    std::shared_ptr<torch::nn::Module> model = task->model();

    std::string last = save_dir + "/checkpoint_last.pt";
    if (opts.resume.empty() && !opts.overwrite && fs::exists(last))
      throw UsageError("'" + last + "' exists: continue it with --resume, or start over with --overwrite or "
                       "another --save-dir");
    if (!t.init_from.empty() && opts.resume.empty()) {
      const auto start = models::read_meta(t.init_from);
      check_fine_tuning_start(start, t.init_from, cfg, info, src_spm, tgt_spm);
      models::load_weights(t.init_from, *model);
      spdlog::info("fine-tuning: starting from the weights of '{}'", t.init_from);
    }
    if (!t.init_encoder_from.empty() && opts.resume.empty()) {
      auto* tt = dynamic_cast<TranslationTask*>(task.get());
      tt->init_encoder_from(t.init_encoder_from);
    }
    learner = std::make_unique<Learner>(model, t, device,
                                        runtime::resolve_precision(t.precision, device, "training.precision"));

    if (!opts.resume.empty()) {
      resume_from(opts.resume);
      // Nothing left to do: the run must not take another update, validate or save (every resume of a finished
      // run would otherwise add a step and rewrite its checkpoints), nor rewrite config.json or metrics.
      check_finished_before_start();
      if (finished_reason != StopReason::kNone) return;
    } else {
      dp->broadcast_parameters(*model);
    }
    learner->start_average();  // from the weights every rank now has
    if (master) {
      std::error_code ec;
      fs::create_directories(save_dir, ec);
      if (ec) throw IoError("cannot create training.save_dir '" + save_dir + "': " + ec.message());
      // Saves killed mid-write (SIGKILL, a lost machine) leave their temporaries; this run removes those.
      remove_stale_temporaries(save_dir);
      write_file_atomically(save_dir + "/config.json", config::to_json(cfg).dump(2) + "\n");
      metrics = MetricsLog(save_dir + "/" + t.metrics_file, /*truncate=*/opts.resume.empty());
    }
  }

  void resume_from(const std::string& path) {
    if (!fs::exists(path)) throw DataError("cannot resume: checkpoint '" + path + "' does not exist");
    auto meta = models::read_meta(path);
    models::require_float_checkpoint(meta, path, "--resume");
    auto diffs = model_config_differences(meta.config, config::to_json(cfg));
    if (!diffs.empty()) {
      std::string msg = "cannot resume from '" + path + "': the model config differs:";
      for (const auto& d : diffs) msg += "\n  " + d;
      throw ConfigError(msg);
    }
    std::string old_task = meta.config.value("/training/task"_json_pointer, std::string("translation"));
    if (old_task != config::name_of(cfg.training.task))
      throw ConfigError("cannot resume from '" + path + "': training.task differs (checkpoint '" + old_task +
                        "', config '" + config::name_of(cfg.training.task) + "')");
    if (meta.src_vocab_size != info.src_vocab_size ||
        (cfg.training.task == TrainingTask::kTranslation && meta.tgt_vocab_size != info.tgt_vocab_size))
      throw ConfigError("cannot resume from '" + path + "': vocabulary sizes differ (checkpoint src_vocab_size " +
                        std::to_string(meta.src_vocab_size) + ", tgt_vocab_size " +
                        std::to_string(meta.tgt_vocab_size) + "; dataset '" + info.dir + "' src_vocab_size " +
                        std::to_string(info.src_vocab_size) + ", tgt_vocab_size " +
                        std::to_string(info.tgt_vocab_size) + ")");
    for (const char* key : {"batch_tokens", "update_freq", "max_len", "lr", "schedule", "warmup_steps"}) {
      auto p = nlohmann::json::json_pointer(std::string("/training/") + key);
      if (meta.config.contains(p) && meta.config[p] != config::to_json(cfg)[p])
        spdlog::warn("resuming with a different training.{} ({} -> {}): the run will not repeat an "
                     "uninterrupted one exactly",
                     key, meta.config[p].dump(), config::to_json(cfg)[p].dump());
    }
    // The model is on `device` already, so load_weights maps the archive there: the AdamW moments it restores
    // land beside their parameters, whichever device wrote the checkpoint.
    models::load_weights(path, learner->model(), [&](const models::TensorArchive& a) {
      learner->load(a, path);
      state.load(a, path, device);
      task->load_state(a);
    });
    spdlog::info("resumed from '{}' at step {}, epoch {} (batch {} of the epoch)", path, state.step, state.epoch,
                 state.batch_in_epoch);
  }

  // Nothing left to do when the resumed state already meets a stop condition (finished_reason/detail).
  void check_finished_before_start() {
    const auto finished = scheduler.finished_before_start(state, [&] {
      return data::plan_epoch(task->train_lengths(), cfg.training.batch_tokens,
                              static_cast<uint64_t>(cfg.runtime.seed), state.epoch)
          .size();
    });
    finished_reason = finished.reason;
    finished_detail = finished.detail;
  }

  nlohmann::json info_json() const {
    return {{"step", state.step},
            {"epoch", state.epoch},
            {"task", cfg.training.task},
            {"dataset", info.dir},
            {"validation", state.valid_history.empty() ? nlohmann::json() : state.valid_history.back()},
            {"best", {{"metric", cfg.training.early_stop_metric}, {"value", state.best}, {"step", state.best_step}}},
            {"valid_history", state.valid_history}};
  }

  // Rank 0 writes checkpoint_<step>.pt (when keep_last > 0) and checkpoint_last.pt, atomically.
  void save_checkpoints(bool keep_numbered) {
    if (!master) return;
    models::ModelMeta meta;
    meta.config = config::to_json(cfg);
    meta.src_spm = src_spm;
    meta.tgt_spm = tgt_spm;
    meta.src_pieces = info.src_pieces;
    meta.tgt_pieces = info.tgt_pieces;
    meta.control_pieces = info.control_pieces;
    meta.languages = info.languages;
    meta.info = info_json();
    std::string last = save_dir + "/checkpoint_last.pt";
    models::save_checkpoint(last, learner->model(), meta, [&](models::TensorArchive& a) {
      learner->save(a);
      state.save(a, device);
      task->save_state(a);
    });
    if (learner->ema()) {
      // The average as a model of its own, to translate with (no optimizer state: not a run to resume).
      models::ModelMeta averaged = meta;
      averaged.info["weights"] = "ema";
      averaged.info["ema_decay"] = cfg.training.ema_decay;
      learner->with_averaged_weights(
          [&] { models::save_checkpoint(save_dir + "/checkpoint_ema.pt", learner->model(), averaged); });
    }
    if (keep_numbered && cfg.training.keep_last > 0) {
      copy_file_atomically(last, save_dir + "/checkpoint_" + std::to_string(state.step) + ".pt");
      scheduler.prune_numbered_checkpoints(save_dir);
    }
    spdlog::info("saved checkpoint at step {} in '{}'", state.step, save_dir);
  }

  // Validates with the training's random generators untouched, updates the early-stopping state and reports.
  ValidationVerdict validate(TrainResult& result, TrainingReporter& reporter) {
    const auto rng = GeneratorStates::capture(device);
    auto t0 = Clock::now();
    ValidationResult r = learner->with_averaged_weights([&] { return task->validate(device, learner->precision()); });
    learner->model().train();
    rng.restore(device);
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    const ValidationVerdict verdict = scheduler.record_validation(state, r);
    nlohmann::json rec = r.to_json();
    rec["type"] = "valid";
    rec["step"] = state.step;
    rec["epoch"] = state.epoch;
    rec["seconds"] = secs;
    rec["best"] = state.best;
    state.valid_history.push_back(rec);
    result.last_validation = rec;
    reporter.validation(state, r, rec, verdict.improved, secs);
    return verdict;
  }

  // checkpoint_last.pt (+ checkpoint_<step>.pt), and checkpoint_best.pt when the validation just improved.
  void save(bool keep_numbered, bool best) {
    save_checkpoints(keep_numbered);
    // With an average, the validated weights are the average's: best is a copy of checkpoint_ema.pt.
    if (best && master)
      copy_file_atomically(save_dir + (learner->ema() ? "/checkpoint_ema.pt" : "/checkpoint_last.pt"),
                      save_dir + "/checkpoint_best.pt");
  }

  // The batches of plan[begin, end) that this rank trains on, read from the dataset.
  std::vector<data::Batch> read_batches(const data::BatchPlan& plan, int64_t begin, int64_t end) {
    std::vector<data::Batch> batches;
    try {
      for (int64_t i = begin; i < end; ++i)
        if (dp->owns_batch(i)) batches.push_back(task->train_batch(plan[static_cast<size_t>(i)], state.epoch));
    } catch (const c10::Error& e) {
      throw DataError(std::string("reading training batch: ") + brief_reason(e));
    }
    return batches;
  }

  TrainResult run() {
    const auto& t = cfg.training;
    TrainResult result;
    if (finished_reason != StopReason::kNone) {
      if (master)
        spdlog::info("nothing to do: {}; the checkpoints in '{}' are left as they are", finished_detail, save_dir);
      result.stop_reason = finished_reason;
      result.already_finished = true;
      result.steps = state.step;
      result.epoch = state.epoch;
      result.skipped_steps = state.skipped_steps;
      return result;
    }
    install_shutdown_handlers();
    const auto& table = task->train_lengths();
    const int world = dp->world_size();
    const uint64_t seed = static_cast<uint64_t>(cfg.runtime.seed);
    auto plan = data::plan_epoch(table, t.batch_tokens, seed, state.epoch);
    const double elapsed_before = state.elapsed;
    const auto start = Clock::now();
    bool saved_at_step = false;
    HostReads reads;
    UpdateStep step(t, *task, *learner, *dp, opts.faults);
    TrainingReporter reporter(t, *task, *learner, master, metrics, reads, start, state.step);
    std::unique_ptr<BatchDumpWriter> dump;
    if (master && !t.dump_batches.empty()) dump = std::make_unique<BatchDumpWriter>(t.dump_batches);
    int64_t n_parameters = 0;
    for (const auto& p : learner->model().parameters()) n_parameters += p.numel();
    reporter.training_begins(n_parameters, device.str(), world, table.ids.size(), plan.size());

    while (true) {
      // Next group of batches (end of epoch: next epoch, reshuffled from the seed).
      if (state.batch_in_epoch >= static_cast<int64_t>(plan.size())) {
        if (scheduler.max_epochs_reached(state, plan.size())) {
          result.stop_reason = StopReason::kMaxEpochs;
          break;
        }
        ++state.epoch;
        state.batch_in_epoch = 0;
        plan = data::plan_epoch(table, t.batch_tokens, seed, state.epoch);
        reporter.epoch_begins(state.epoch, plan.size());
      }
      const int64_t begin = state.batch_in_epoch;
      const int64_t end = std::min<int64_t>(plan.size(), begin + static_cast<int64_t>(t.update_freq) * world);
      learner->model().train();
      AccumulatedUpdate update;
      UpdateOutcome outcome;
      {
        RECORD_USER_SCOPE(runtime::kStepScope);  // what runtime::OperatorCounter counts per update
        const auto batches = read_batches(plan, begin, end);
        update = step.accumulate(batches, state, result.oom_retries);
        if (dump)
          for (const auto& b : batches) dump->write(b);
        outcome = step.apply(update, state, reads);
      }
      state.batch_in_epoch = end;
      if (outcome.applied) saved_at_step = false;
      reporter.add(outcome);
      state.elapsed = elapsed_before + std::chrono::duration<double>(Clock::now() - start).count();
      if (scheduler.log_due(state) && reporter.has_interval()) reporter.progress(state);

      if (auto reason = scheduler.stop_after_update(state, update.stop_votes); reason != StopReason::kNone) {
        if (reason == StopReason::kSignal) result.signal = shutdown_requested();
        result.stop_reason = reason;
        break;
      }
      ValidationVerdict verdict;
      if (scheduler.validation_due(state)) verdict = validate(result, reporter);
      const bool save_step = scheduler.save_due(state, saved_at_step);
      if (save_step || verdict.improved) {
        save(/*keep_numbered=*/save_step, verdict.improved);
        saved_at_step = true;
      }
      if (verdict.patience_exhausted) {
        result.stop_reason = StopReason::kEarlyStopping;
        break;
      }
    }

    reporter.finish();  // the last updates' losses, for TrainResult
    if (dump) dump->finish();
    ValidationVerdict verdict;
    if (scheduler.validation_due_at_end(state, result.stop_reason)) verdict = validate(result, reporter);
    save(/*keep_numbered=*/result.stop_reason != StopReason::kSignal, verdict.improved);
    reporter.training_ends(state, result.stop_reason, result.signal, save_dir);
    dp->barrier();
    result.steps = state.step;
    result.epoch = state.epoch;
    result.skipped_steps = state.skipped_steps;
    result.losses = reporter.losses();
    result.host_reads = reads.count;
    if (learner->loss_scaling()) {
      result.overflow_steps = learner->scaler().overflows();
      result.loss_scale = learner->scaler().scale();
    }
    return result;
  }
};

Trainer::Trainer(const Config& cfg, TrainerOptions options, std::shared_ptr<DataParallel> dp)
    : impl_(std::make_unique<Impl>(cfg, std::move(options), std::move(dp))) {}
Trainer::~Trainer() = default;
TrainResult Trainer::run() { return impl_->run(); }

}  // namespace parla::train

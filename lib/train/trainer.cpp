#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "core/error.h"
#include "core/progress.h"
#include "core/runtime_device.h"
#include "data/batch_sampler.h"
#include "data/output_file.h"
#include "data/token_dataset.h"
#include "models/checkpoint.h"
#include "models/seq2seq.h"
#include "train/batch_dump.h"
#include "train/bert_pretraining.h"
#include "train/distributed.h"
#include "train/dynamic_loss_scaler.h"
#include "train/fine_tuning.h"
#include "train/lr_schedule.h"
#include "train/metrics_log.h"
#include "train/optimizer_state.h"
#include "train/shutdown_signal.h"
#include "train/task.h"
#include "train/training_state.h"
#include "train/translation_task.h"
#include "train/weight_ema.h"

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

// Through a temporary in the same folder, removed when anything fails, so `to` is either the whole copy or
// untouched.
void copy_atomically(const std::string& from, const std::string& to) { data::copy_file_atomically(from, to); }

// Rows [start, start + n) of a batch, without the padding columns that only longer rows needed.
data::Batch batch_rows(const data::Batch& b, int64_t start, int64_t n) {
  auto rows = [&](const torch::Tensor& x) { return x.defined() ? x.narrow(0, start, n).contiguous() : x; };
  // Width of the longest row: the last column holding a non-pad token in any row (padding is at the end).
  auto width = [](const torch::Tensor& x) {
    auto used = x.ne(models::kPadId).any(0).nonzero();
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
    o.src_tokens = o.src.ne(models::kPadId).sum().item<int64_t>();
  }
  if (o.tgt_out.defined() && o.tgt_out.dim() == 2) {
    const int64_t t = std::max(width(o.tgt_in), width(o.tgt_out));
    o.tgt_in = o.tgt_in.narrow(1, 0, t).contiguous();
    o.tgt_out = o.tgt_out.narrow(1, 0, t).contiguous();
    o.tgt_tokens = o.tgt_out.ne(models::kPadId).sum().item<int64_t>();
  }
  return o;
}

[[noreturn]] void throw_injected_oom(int64_t sentences) {
  TORCH_CHECK_WITH(OutOfMemoryError, false, "out of memory: injected for a batch of ", sentences,
                   " sentences (TrainerOptions::inject_oom_above_sentences)");
  std::abort();  // not reached; TORCH_CHECK_WITH is not declared noreturn
}

bool lower_is_better(ValidationMetric metric) { return metric != ValidationMetric::kBleu; }

double metric_value(const ValidationResult& r, ValidationMetric metric) {
  switch (metric) {
    case ValidationMetric::kBleu: return r.bleu;
    case ValidationMetric::kPerplexity: return r.perplexity;
    case ValidationMetric::kLoss: break;
  }
  return r.loss;
}

}  // namespace

struct Trainer::Impl {
  Config cfg;
  TrainerOptions opts;
  std::shared_ptr<DataParallel> dp;
  torch::Device device{torch::kCPU};
  data::DatasetInfo info;
  std::unique_ptr<Task> task;
  std::shared_ptr<torch::nn::Module> model;
  std::unique_ptr<torch::optim::AdamW> optimizer;
  std::unique_ptr<LrSchedule> schedule;
  // Autocast dtype of forward + loss (training.precision); parameters and optimizer state stay fp32 whatever it is.
  c10::ScalarType precision = c10::ScalarType::Float;
  // Used only when precision is fp16; its state travels in checkpoints as "loss_scaler".
  DynamicLossScaler scaler{LossScalerOptions::from_config(cfg.training)};
  TrainingState state;
  // training.ema_decay > 0: the moving average of the weights, which validation and checkpoint_best.pt use.
  std::unique_ptr<WeightEma> ema;
  MetricsLog metrics;
  std::string save_dir;
  std::string src_spm, tgt_spm;
  bool master = true;
  // A resumed run whose checkpoint had already reached a stop condition: which (TrainResult::stop_reason) and a
  // sentence for the log; empty while there is training to do.
  std::string finished_reason, finished_detail;

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
    if (t.task == TrainingTask::kBert)
      task = std::make_unique<BertPretrainingTask>(cfg, info);
    else
      task = std::make_unique<TranslationTask>(cfg, info);
    model = task->model();

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
    model->to(device);
    model->train();

    torch::optim::AdamWOptions ao(t.lr);
    ao.betas({t.adam_beta1, t.adam_beta2}).eps(t.adam_eps).weight_decay(t.weight_decay);
    optimizer = std::make_unique<torch::optim::AdamW>(model->parameters(), ao);
    schedule = std::make_unique<LrSchedule>(LrSchedule::from_config(t));
    precision = runtime::resolve_precision(t.precision, device, "training.precision");

    if (!opts.resume.empty()) {
      resume_from(opts.resume);
      // Nothing left to do: the run must not take another update, validate or save (every resume of a finished
      // run would otherwise add a step and rewrite its checkpoints), nor rewrite config.json or metrics.
      check_finished_before_start();
      if (!finished_reason.empty()) return;
    } else {
      dp->broadcast_parameters(*model);
    }
    if (t.ema_decay > 0 && !ema) ema = std::make_unique<WeightEma>(*model, t.ema_decay);
    if (master) {
      std::error_code ec;
      fs::create_directories(save_dir, ec);
      if (ec) throw IoError("cannot create training.save_dir '" + save_dir + "': " + ec.message());
      // Saves killed mid-write (SIGKILL, a lost machine) leave their temporaries; this run removes those.
      data::remove_stale_temporaries(save_dir);
      data::write_file_atomically(save_dir + "/config.json", config::to_json(cfg).dump(2) + "\n");
      metrics = MetricsLog(save_dir + "/" + t.metrics_file, /*truncate=*/opts.resume.empty());
    }
  }

  // The optimizer's parameters by name (it holds the model's parameters in this order), for its checkpoint entries.
  std::vector<std::string> parameter_names() const {
    std::vector<std::string> names;
    for (const auto& p : model->named_parameters()) names.push_back(p.key());
    return names;
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
    models::load_weights(path, *model, [&](const models::TensorArchive& a) {
      if (!load_optimizer_state(a, *optimizer, parameter_names()))
        throw DataError("'" + path + "' has no optimizer state (a model-only or averaged checkpoint?)");
      state.load(a, path, device);
      if (cfg.training.ema_decay > 0) {
        ema = std::make_unique<WeightEma>(*model, cfg.training.ema_decay);
        if (!ema->load(a, path))
          spdlog::warn("'{}' holds no weight average (it was written with training.ema_decay 0): the average "
                       "starts from its weights",
                       path);
      }
      task->load_state(a);
      scaler.load(a, path);  // absent (fp32/bf16 checkpoint): a fresh scaler
    });
    spdlog::info("resumed from '{}' at step {}, epoch {} (batch {} of the epoch)", path, state.step, state.epoch,
                 state.batch_in_epoch);
  }

  // The stop conditions, one definition for the loop and for a resumed run's check before it starts.
  bool max_steps_reached() const { return cfg.training.max_steps > 0 && state.step >= cfg.training.max_steps; }
  bool max_time_reached() const { return cfg.training.max_time > 0 && state.elapsed >= cfg.training.max_time * 60; }
  // The last epoch allowed is used up (`plan_size`: batches of the current epoch's plan).
  bool max_epochs_reached(size_t plan_size) const {
    return cfg.training.max_epochs > 0 && state.epoch >= cfg.training.max_epochs &&
           state.batch_in_epoch >= static_cast<int64_t>(plan_size);
  }
  bool patience_exhausted() const {
    return cfg.training.patience > 0 && state.stale_validations >= cfg.training.patience;
  }

  // Sets finished_reason/detail when the resumed state already meets a stop condition of the (possibly changed)
  // config, in the order the loop tests them. Raising the limit on resume (--max-steps ...) trains on.
  void check_finished_before_start() {
    const auto& t = cfg.training;
    const std::string where = fmt::format("step {}, epoch {}, {} trained", state.step, state.epoch,
                                          Progress::format_duration(state.elapsed));
    if (max_steps_reached()) {
      finished_reason = "max_steps";
      finished_detail = fmt::format("training.max_steps = {} reached ({}); raise it (--max-steps) to train on",
                                    t.max_steps, where);
    } else if (max_time_reached()) {
      finished_reason = "max_time";
      finished_detail = fmt::format("training.max_time = {:g} minutes reached ({}); raise it (--max-time) to train on",
                                    t.max_time, where);
    } else if (t.max_epochs > 0 &&  // the epoch's plan is built only when an epoch limit can apply
               max_epochs_reached(data::plan_epoch(task->train_lengths(), t.batch_tokens,
                                                   static_cast<uint64_t>(cfg.runtime.seed), state.epoch)
                                      .size())) {
      finished_reason = "max_epochs";
      finished_detail = fmt::format("training.max_epochs = {} reached (epoch {} complete; {}); raise it "
                                    "(--max-epochs) to train on",
                                    t.max_epochs, state.epoch, where);
    } else if (patience_exhausted()) {
      finished_reason = "early_stopping";
      finished_detail = fmt::format("early stopping: {} validations without a better {} (training.patience = {}; "
                                    "best {:.4f} at step {}; {}); raise training.patience to train on",
                                    state.stale_validations, config::name_of(t.early_stop_metric), t.patience, state.best,
                                    state.best_step, where);
    }
  }

  nlohmann::json info_json() const {
    return {{"step", state.step},
            {"epoch", state.epoch},
            {"task", cfg.training.task},
            {"dataset", info.dir},
            {"validation", state.valid_history.empty() ? nlohmann::json() : state.valid_history.back()},
            {"best", {{"metric", config::name_of(cfg.training.early_stop_metric)}, {"value", state.best}, {"step", state.best_step}}},
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
    meta.info = info_json();
    std::string last = save_dir + "/checkpoint_last.pt";
    models::save_checkpoint(last, *model, meta, [&](models::TensorArchive& a) {
      save_optimizer_state(*optimizer, parameter_names(), a);
      state.save(a, device);
      task->save_state(a);
      if (precision == c10::ScalarType::Half) scaler.save(a);
      if (ema) ema->save(a);
    });
    if (ema) {
      // The average as a model of its own, to translate with (no optimizer state: not a run to resume).
      models::ModelMeta averaged = meta;
      averaged.info["weights"] = "ema";
      averaged.info["ema_decay"] = cfg.training.ema_decay;
      with_averaged_weights(ema.get(),
                            [&] { models::save_checkpoint(save_dir + "/checkpoint_ema.pt", *model, averaged); });
    }
    if (keep_numbered && cfg.training.keep_last > 0) {
      copy_atomically(last, save_dir + "/checkpoint_" + std::to_string(state.step) + ".pt");
      prune_numbered();
    }
    spdlog::info("saved checkpoint at step {} in '{}'", state.step, save_dir);
  }

  void prune_numbered() {
    static const std::regex re("checkpoint_([0-9]+)\\.pt");
    std::vector<std::pair<int64_t, fs::path>> found;
    for (const auto& e : fs::directory_iterator(save_dir)) {
      std::smatch m;
      std::string name = e.path().filename().string();
      if (std::regex_match(name, m, re)) found.emplace_back(std::stoll(m[1]), e.path());
    }
    std::sort(found.begin(), found.end());
    while (static_cast<int>(found.size()) > cfg.training.keep_last) {
      std::error_code ec;
      fs::remove(found.front().second, ec);
      found.erase(found.begin());
    }
  }

  struct Verdict {
    bool improved = false;
    bool patience_exhausted = false;
  };

  // Validates with the training's random generators untouched, updates the early-stopping state and logs.
  Verdict validate(TrainResult& result) {
    const auto rng = GeneratorStates::capture(device);
    auto t0 = Clock::now();
    ValidationResult r = with_averaged_weights(ema.get(), [&] { return task->validate(device); });
    model->train();
    rng.restore(device);
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    const ValidationMetric metric = cfg.training.early_stop_metric;
    double v = metric_value(r, metric);
    bool improved = !state.has_best || (lower_is_better(metric) ? v < state.best : v > state.best);
    if (improved) {
      state.has_best = true;
      state.best = v;
      state.best_step = state.step;
      state.stale_validations = 0;
    } else {
      ++state.stale_validations;
    }
    state.last_valid_step = state.step;
    nlohmann::json rec = r.to_json();
    rec["type"] = "valid";
    rec["step"] = state.step;
    rec["epoch"] = state.epoch;
    rec["seconds"] = secs;
    rec["best"] = state.best;
    state.valid_history.push_back(rec);
    result.last_validation = rec;
    if (master) {
      metrics.write(rec);
      std::string bleu = r.bleu >= 0 ? fmt::format(" | bleu {:.2f}", r.bleu) : "";
      spdlog::info("valid | step {} | epoch {} | loss {:.4f} | ppl {:.2f}{} | best {} {:.4f} (step {}){} | {}",
                   state.step, state.epoch, r.loss, r.perplexity, bleu, config::name_of(metric), state.best, state.best_step,
                   improved ? " *" : "", Progress::format_duration(secs));
    }
    return {improved, patience_exhausted()};
  }

  // checkpoint_last.pt (+ checkpoint_<step>.pt), and checkpoint_best.pt when the validation just improved.
  void save(bool keep_numbered, bool best) {
    save_checkpoints(keep_numbered);
    // With an average, the validated weights are the average's: best is a copy of checkpoint_ema.pt.
    if (best && master)
      copy_atomically(save_dir + (ema ? "/checkpoint_ema.pt" : "/checkpoint_last.pt"),
                      save_dir + "/checkpoint_best.pt");
  }

  // What one update left on the device until the next progress line reads it (one read for the whole interval).
  struct PendingUpdate {
    bool skipped = false;
    torch::Tensor stats;          // float64 [terms + 1]: each term's loss sum over the update, then the nll sum
    std::vector<double> counts;   // the update's global item count per term (host: known before the forward pass)
  };

  // One device-to-host copy; every read of training figures by the loop goes through here and is counted.
  torch::Tensor read_to_host(const torch::Tensor& t, TrainResult& result) {
    ++result.host_reads;
    return t.to(torch::kCPU);
  }

  // Forward and backward of one batch; returns its figures (each term's loss sum, then the nll sum: float64
  // [terms + 1], detached, on the device). `in_backward` turns true once backward() may have touched .grad.
  torch::Tensor train_on_batch(const data::Batch& cpu_batch, const std::vector<double>& global, bool poison,
                               bool loss_scaling, bool& in_backward) {
    const size_t n_terms = task->num_terms();
    if (opts.inject_oom_above_sentences >= 0 && !opts.inject_oom_after_backward &&
        cpu_batch.sentences > opts.inject_oom_above_sentences)
      throw_injected_oom(cpu_batch.sentences);
    auto b = cpu_batch.to(device);
    torch::Tensor total;
    std::vector<torch::Tensor> figures;
    {
      // Mixed precision (Micikevicius et al. 2018, Sec. 3): autocast runs the forward pass and the loss in
      // bf16/fp16 where that is safe; the parameters (fp32 master weights) are cast per use, so the
      // backward pass, outside the scope, accumulates fp32 gradients for an fp32 optimizer.
      runtime::AutocastScope autocast(device, precision);
      auto terms = task->loss(b);
      auto zero = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
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
      if (poison) total = total * std::numeric_limits<double>::quiet_NaN();
      // Loss scaling (ibid., Sec. 3.2): shifts small fp16 gradients into the representable range.
      if (loss_scaling) total = total * scaler.scale();
      in_backward = true;
      total.backward();
      if (opts.inject_oom_above_sentences >= 0 && opts.inject_oom_after_backward &&
          cpu_batch.sentences > opts.inject_oom_above_sentences)
        throw_injected_oom(cpu_batch.sentences);
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
  void train_update_batches(const std::vector<data::Batch>& batches, const std::vector<double>& global, bool poison,
                            bool loss_scaling, torch::Tensor& stats, const std::vector<torch::Tensor>& params,
                            TrainResult& result) {
    const auto& t = cfg.training;
    std::deque<data::Batch> todo(batches.begin(), batches.end());
    std::vector<data::Batch> done;
    while (!todo.empty()) {
      bool in_backward = false;
      bool oom = false;
      try {
        stats.add_(train_on_batch(todo.front(), global, poison, loss_scaling, in_backward));
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
                        " on a single sentence: lower training.batch_tokens (now " + std::to_string(t.batch_tokens) +
                        ") and training.max_len, and raise training.update_freq to keep the effective batch");
      ++result.oom_retries;
      const int64_t half = (failed.sentences + 1) / 2;
      todo.push_front(batch_rows(failed, half, failed.sentences - half));
      todo.push_front(batch_rows(failed, 0, half));
      if (in_backward) {
        for (const auto& p : params) p.mutable_grad() = torch::Tensor();
        stats.zero_();
        for (auto it = done.rbegin(); it != done.rend(); ++it) todo.push_front(std::move(*it));
        done.clear();
      }
      spdlog::warn("step {}: out of memory on a batch of {} sentences{}: retrying it as two halves",
                   state.step + 1, failed.sentences, in_backward ? " during backward (the update starts over)" : "");
    }
  }

  // Global L2 norm of the gradients as a device tensor, and clipping to max_norm (> 0) with a device-side factor:
  // torch::nn::utils::clip_grad_norm_'s arithmetic (so fp32 runs are bit-identical), without its host read.
  torch::Tensor clip_gradients(const std::vector<torch::Tensor>& params, double max_norm) {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> grads, norms;
    for (const auto& p : params)
      if (p.grad().defined()) grads.push_back(p.grad());
    if (grads.empty()) return torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(device));
    for (const auto& g : grads) norms.push_back(g.norm(2));
    auto total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2);
    if (max_norm > 0) {
      // min(1, max_norm / (norm + 1e-6)); multiplying by an exact 1 changes nothing, hence no branch on the host.
      auto factor = torch::clamp(max_norm / (total + 1e-6), c10::nullopt, 1.0);
      for (auto& g : grads) g.mul_(factor);
    }
    return total;
  }

  TrainResult run() {
    const auto& t = cfg.training;
    TrainResult result;
    if (!finished_reason.empty()) {
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
    auto params = model->parameters();
    const double elapsed_before = state.elapsed;
    const auto start = Clock::now();
    const int64_t start_step = state.step;
    int64_t update_index = 0;
    bool saved_at_step = false;
    // fp16 needs dynamic loss scaling (its gradients underflow otherwise); bf16 has fp32's exponent range and
    // does not (Kalamkar et al. 2019).
    const bool loss_scaling = precision == c10::ScalarType::Half;

    // Interval figures for progress lines.
    double iv_loss = 0, iv_nll = 0, iv_count = 0, iv_tokens = 0;
    auto iv_start = Clock::now();
    std::unique_ptr<BatchDumpWriter> dump;
    if (master && !t.dump_batches.empty()) dump = std::make_unique<BatchDumpWriter>(t.dump_batches);
    // Updates whose figures are still on the device, and the last update's gradient norm (what progress lines
    // report).
    std::vector<PendingUpdate> pending_updates;
    torch::Tensor last_grad_norm;
    // Reads the pending figures in one copy and does the host arithmetic the loop did per update before (the same
    // operations in the same order, so the losses are bit-identical): per-update losses, interval sums. Returns
    // the last gradient norm.
    auto flush = [&]() -> double {
      std::vector<torch::Tensor> parts;
      for (const auto& u : pending_updates)
        if (!u.skipped) parts.push_back(u.stats);
      parts.push_back(last_grad_norm.defined() ? last_grad_norm.detach().to(torch::kFloat64).reshape({1})
                                               : torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat64).device(device)));
      auto host = read_to_host(torch::cat(parts), result).contiguous();
      const double* v = host.data_ptr<double>();
      const size_t n_terms = task->num_terms();
      for (const auto& u : pending_updates) {
        if (u.skipped) {
          result.losses.push_back(std::numeric_limits<double>::quiet_NaN());
          continue;
        }
        double loss = 0;
        for (size_t i = 0; i < n_terms; ++i)
          if (u.counts[i] > 0) loss += v[i] / u.counts[i];
        const double nll = u.counts[0] > 0 ? v[n_terms] / u.counts[0] : 0.0;
        result.losses.push_back(loss);
        iv_loss += loss * u.counts[0];
        iv_nll += nll * u.counts[0];
        v += n_terms + 1;
      }
      pending_updates.clear();
      return *v;
    };

    if (master)
      spdlog::info("training {} ({} parameters) on {} ({} rank{}): {} pairs, {} batches per epoch",
                   config::name_of(t.task), [&] {
                     int64_t n = 0;
                     for (const auto& p : params) n += p.numel();
                     return n;
                   }(), device.str(), world, world > 1 ? "s" : "", table.ids.size(), plan.size());

    while (true) {
      // --- next group of batches (end of epoch: next epoch, reshuffled from the seed) ---
      if (state.batch_in_epoch >= static_cast<int64_t>(plan.size())) {
        if (max_epochs_reached(plan.size())) {
          result.stop_reason = "max_epochs";
          break;
        }
        ++state.epoch;
        state.batch_in_epoch = 0;
        plan = data::plan_epoch(table, t.batch_tokens, seed, state.epoch);
        if (master) spdlog::info("epoch {} begins ({} batches)", state.epoch, plan.size());
      }
      const int64_t begin = state.batch_in_epoch;
      const int64_t end = std::min<int64_t>(plan.size(), begin + static_cast<int64_t>(t.update_freq) * world);

      model->train();
      std::vector<data::Batch> batches;
      try {
        for (int64_t i = begin; i < end; ++i)
          if (dp->owns_batch(i)) batches.push_back(task->train_batch(plan[static_cast<size_t>(i)], state.epoch));
      } catch (const c10::Error& e) {
        throw DataError(std::string("reading training batch: ") + brief_reason(e));
      }
      // Item counts per term (known before the forward pass), the shutdown flag and the tokens, summed over
      // ranks in one collective.
      const size_t n_terms = task->num_terms();
      std::vector<double> counts(n_terms, 0.0);
      int64_t local_tokens = 0;
      for (auto& b : batches) {
        auto c = task->counts(b);
        for (size_t i = 0; i < n_terms; ++i) counts[i] += c[i];
        local_tokens += Task::batch_tokens(b);
      }
      const bool poison = opts.poison_update && opts.poison_update(update_index);
      std::vector<double> to_reduce = counts;
      to_reduce.push_back(shutdown_requested() != 0 ? 1.0 : 0.0);
      to_reduce.push_back(static_cast<double>(local_tokens));
      auto global = dp->all_reduce_sum(to_reduce);
      const double stop_votes = global[n_terms];
      const double update_tokens = global[n_terms + 1];

      // The update's figures stay on the device (float64: each term's loss sum, then the nll sum) until a
      // progress line reads them; the only per-update read is the finite flags below.
      auto stats = torch::zeros({static_cast<int64_t>(n_terms) + 1},
                                torch::TensorOptions().dtype(torch::kFloat64).device(device));
      train_update_batches(batches, global, poison, loss_scaling, stats, params, result);
      if (dump)
        for (const auto& b : batches) dump->write(b);
      dp->all_reduce_gradients(*model);
      dp->average_running_statistics(*model);
      if (loss_scaling) {
        // Unscale before clipping, so clip_norm and the reported norm refer to the true gradient. The scale is a
        // power of two: exact. Overflow shows as a non-finite norm below, in the same read as the loss's flag.
        const double inv_scale = 1.0 / scaler.scale();
        for (auto& p : params)
          if (p.grad().defined()) p.grad().mul_(inv_scale);
      }
      dp->all_reduce_sum_(stats);

      // Gradient norm over all parameters (clipped when clip_norm > 0).
      last_grad_norm = clip_gradients(params, t.clip_norm);
      state.batch_in_epoch = end;
      ++update_index;

      // The one host read of the update: is the loss finite (the terms with items), is the gradient norm finite.
      std::vector<int64_t> used;
      for (size_t i = 0; i < n_terms; ++i)
        if (global[i] > 0) used.push_back(static_cast<int64_t>(i));
      auto loss_finite = used.empty() ? torch::ones({}, torch::TensorOptions().dtype(torch::kBool).device(device))
                                      : torch::isfinite(stats.index_select(0, torch::tensor(used).to(device))).all();
      auto flags = read_to_host(torch::stack({loss_finite, torch::isfinite(last_grad_norm)}), result);
      const bool loss_ok = flags[0].item<bool>() && !poison;
      const bool norm_ok = flags[1].item<bool>();

      PendingUpdate pending;
      pending.skipped = true;
      if (loss_scaling && loss_ok && !norm_ok) {
        // A finite loss with non-finite gradients: the scale was too high for fp16, not a diverging model. Skip
        // the update and halve the scale; not a bad step (fairseq, GradScaler). The scaler stops the run (a
        // DataError) when the scale underflows.
        optimizer->zero_grad();
        const double was = scaler.scale();
        scaler.update(false);
        spdlog::info("step {}: fp16 gradients overflowed at loss scale {:g}: update skipped, scale now {:g} "
                     "({} overflows in total)",
                     state.step + 1, was, scaler.scale(), scaler.overflows());
      } else if (!loss_ok || !norm_ok) {
        optimizer->zero_grad();
        ++state.bad_steps;
        ++state.skipped_steps;
        // NaN vs infinite is told apart only here, on the rare skipped update (a second read).
        const bool is_nan = poison || read_to_host(torch::stack({stats.isnan().any(), last_grad_norm.isnan()}).any(),
                                                   result).item<bool>();
        spdlog::warn("step {}: {} loss or gradient, update skipped ({} in a row, {} in total)", state.step + 1,
                     is_nan ? "NaN" : "infinite", state.bad_steps, state.skipped_steps);
        if (state.bad_steps >= t.max_bad_steps)
          throw DataError("training diverged: " + std::to_string(state.bad_steps) +
                          " updates in a row had a NaN/inf loss (training.max_bad_steps); lower training.lr, "
                          "raise training.warmup_steps or set training.clip_norm, and resume from the last "
                          "checkpoint");
      } else {
        state.bad_steps = 0;
        if (loss_scaling) scaler.update(true);
        const double lr = (*schedule)(state.step + 1);
        for (auto& g : optimizer->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
        optimizer->step();
        optimizer->zero_grad();
        ++state.step;
        if (ema) ema->update(state.step);
        saved_at_step = false;
        state.tokens += static_cast<int64_t>(update_tokens);
        pending.skipped = false;
        pending.stats = stats;
        pending.counts.assign(global.begin(), global.begin() + static_cast<std::ptrdiff_t>(n_terms));
        iv_count += global[0];
        iv_tokens += update_tokens;
      }
      pending_updates.push_back(std::move(pending));
      state.elapsed = elapsed_before + std::chrono::duration<double>(Clock::now() - start).count();

      // --- progress line and metrics record ---
      if (state.step > 0 && state.step % t.log_every == 0 && iv_count > 0) {
        const double grad_norm = flush();
        double secs = std::chrono::duration<double>(Clock::now() - iv_start).count();
        double mean_loss = iv_loss / iv_count, mean_nll = iv_nll / iv_count;
        double tok_s = secs > 0 ? iv_tokens / secs : 0;
        double run_secs = std::chrono::duration<double>(Clock::now() - start).count();
        double per_step = run_secs / std::max<int64_t>(1, state.step - start_step);
        double eta = std::numeric_limits<double>::quiet_NaN();
        if (t.max_steps > 0) eta = per_step * static_cast<double>(t.max_steps - state.step);
        if (t.max_time > 0) {
          double left = t.max_time * 60 - state.elapsed;
          eta = std::isnan(eta) ? left : std::min(eta, left);
        }
        double lr = (*schedule)(state.step);
        if (master) {
          spdlog::info("step {} | epoch {} | loss {:.4f} | ppl {:.2f} | lr {:.3e} | gnorm {:.3f} | {:.0f} tok/s | "
                       "elapsed {}{}{}",
                       state.step, state.epoch, mean_loss, std::exp(mean_nll), lr, grad_norm, tok_s,
                       Progress::format_duration(state.elapsed),
                       std::isnan(eta) ? "" : " | ETA " + Progress::format_duration(eta),
                       loss_scaling ? fmt::format(" | loss scale {:g}", scaler.scale()) : "");
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
          if (loss_scaling) {
            record["loss_scale"] = scaler.scale();
            record["overflow_steps"] = scaler.overflows();
          }
          metrics.write(record);
        }
        iv_loss = iv_nll = iv_count = iv_tokens = 0;
        iv_start = Clock::now();
      }

      // --- stopping and validation ---
      if (stop_votes > 0) {
        result.signal = shutdown_requested();
        result.stop_reason = "signal";
        break;
      }
      if (max_steps_reached()) {
        result.stop_reason = "max_steps";
        break;
      }
      if (max_time_reached()) {
        result.stop_reason = "max_time";
        break;
      }
      Verdict verdict;
      if (t.valid_every > 0 && state.step > 0 && state.step % t.valid_every == 0 && state.last_valid_step != state.step)
        verdict = validate(result);
      const int64_t save_every = t.save_every > 0 ? t.save_every : t.valid_every;
      bool save_step = save_every > 0 && state.step > 0 && state.step % save_every == 0 && !saved_at_step;
      if (save_step || verdict.improved) {
        save(/*keep_numbered=*/save_step, verdict.improved);
        saved_at_step = true;
      }
      if (verdict.patience_exhausted) {
        result.stop_reason = "early_stopping";
        break;
      }
    }

    if (!pending_updates.empty()) flush();  // the last updates' losses, for TrainResult
    if (dump) dump->finish();
    Verdict verdict;
    if (result.stop_reason != "signal" && state.last_valid_step != state.step && state.step > 0)
      verdict = validate(result);
    save(/*keep_numbered=*/result.stop_reason != "signal", verdict.improved);
    if (master) {
      if (result.stop_reason == "signal")
        spdlog::warn("stopped by signal {} at step {}: saved '{}/checkpoint_last.pt'; continue with --resume",
                     result.signal, state.step, save_dir);
      else
        spdlog::info("training done ({}): {} steps, epoch {}, {} tokens in {}", result.stop_reason, state.step,
                     state.epoch, state.tokens, Progress::format_duration(state.elapsed));
    }
    dp->barrier();
    result.steps = state.step;
    result.epoch = state.epoch;
    result.skipped_steps = state.skipped_steps;
    if (loss_scaling) {
      result.overflow_steps = scaler.overflows();
      result.loss_scale = scaler.scale();
    }
    return result;
  }
};

Trainer::Trainer(const Config& cfg, TrainerOptions options, std::shared_ptr<DataParallel> dp)
    : impl_(std::make_unique<Impl>(cfg, std::move(options), std::move(dp))) {}
Trainer::~Trainer() = default;
TrainResult Trainer::run() { return impl_->run(); }

}  // namespace parla::train

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "models/checkpoint.h"
#include "models/factory.h"
#include "support/cuda.h"
#include "support/run.h"
#include "injected_faults.h"
#include "metrics_records.h"
#include "toy_dataset.h"
#include "train/shutdown_signal.h"
#include "train/trainer.h"

using parla::Config;
using parla::train::Trainer;
using parla::train::TrainerOptions;
namespace fs = std::filesystem;

TEST_CASE("training on a toy copy task lowers the validation loss well below chance") {
  auto data = parla::test::toy_dataset("copy", 12);
  Config cfg = parla::test::toy_config(data, "copy-run");
  cfg.training.max_steps = 300;
  cfg.training.valid_every = 50;
  auto result = Trainer(cfg, {}).run();
  CHECK(result.stop_reason == parla::train::StopReason::kMaxSteps);
  CHECK(result.steps == 300);
  // Guessing from the unigram distribution costs log(8) = 2.08 nats per token (8 ordinary ids, uniform); a model
  // that has learned to copy is far below.
  REQUIRE(result.last_validation.contains("nll"));
  CHECK(result.last_validation["nll"].get<double>() < 0.6 * std::log(8.0));
  CHECK(result.losses.back() < result.losses.front() - 1.0);
  for (const char* f : {"checkpoint_last.pt", "checkpoint_best.pt", "checkpoint_300.pt", "checkpoint_250.pt",
                        "metrics.jsonl", "config.json"})
    CHECK(fs::exists(cfg.training.save_dir + "/" + f));
  CHECK_FALSE(fs::exists(cfg.training.save_dir + "/checkpoint_200.pt"));  // keep_last = 2
  auto meta = parla::models::read_meta(cfg.training.save_dir + "/checkpoint_last.pt");
  CHECK(meta.info["step"] == 300);
  CHECK(meta.info["valid_history"].size() == 6);
}

TEST_CASE("two runs with the same config and seed give the same losses") {
  auto data = parla::test::toy_dataset("determinism");
  Config a = parla::test::toy_config(data, "det-a");
  Config b = parla::test::toy_config(data, "det-b");
  a.training.max_steps = b.training.max_steps = 15;
  auto ra = Trainer(a, {}).run();
  auto rb = Trainer(b, {}).run();
  REQUIRE(ra.losses.size() == 15);
  CHECK(ra.losses == rb.losses);
  Config c = parla::test::toy_config(data, "det-c");
  c.training.max_steps = 15;
  c.runtime.seed = 8;
  CHECK(Trainer(c, {}).run().losses != ra.losses);
}

TEST_CASE("a run interrupted and resumed gives exactly the losses of an uninterrupted run") {
  auto data = parla::test::toy_dataset("resume");
  for (std::string type : {"transformer", "rnn"}) {
    SECTION(type) {
      Config full = parla::test::toy_config(data, "resume-full-" + type, type);
      full.training.max_steps = 40;
      full.training.update_freq = 2;  // accumulation and an epoch boundary (about 25 batches) inside the run
      auto rf = Trainer(full, {}).run();

      Config part = parla::test::toy_config(data, "resume-part-" + type, type);
      part.training.max_steps = 17;
      part.training.update_freq = 2;
      Trainer(part, {}).run();
      part.training.max_steps = 40;
      TrainerOptions o;
      o.resume = part.training.save_dir + "/checkpoint_last.pt";
      auto rp = Trainer(part, o).run();
      CHECK(rp.losses.size() == 23);
      auto lf = parla::test::train_losses(full.training.save_dir), lp = parla::test::train_losses(part.training.save_dir);
      REQUIRE(lf.size() == 40);
      CHECK(lp == lf);
    }
  }
}

TEST_CASE("a NaN loss skips the update, and too many in a row stop training with a message") {
  auto data = parla::test::toy_dataset("nan");
  Config cfg = parla::test::toy_config(data, "nan-run");
  cfg.training.max_steps = 10;
  cfg.training.max_bad_steps = 3;
  TrainerOptions o;
  o.faults = std::make_shared<parla::test::NanLoss>([](int64_t i) { return i == 2 || i == 3; });
  auto r = Trainer(cfg, o).run();
  CHECK(r.skipped_steps == 2);
  CHECK(r.steps == 10);  // skipped updates do not count as steps
  CHECK(std::isnan(r.losses[2]));
  CHECK(std::isfinite(r.losses[4]));

  Config bad = parla::test::toy_config(data, "nan-run-2");
  bad.training.max_steps = 10;
  bad.training.max_bad_steps = 3;
  TrainerOptions always;
  always.faults = std::make_shared<parla::test::NanLoss>([](int64_t i) { return i >= 1; });
  CHECK_THROWS_WITH(Trainer(bad, always).run(), Catch::Contains("max_bad_steps"));
}

TEST_CASE("resuming with a different model config names every key that differs") {
  auto data = parla::test::toy_dataset("mismatch");
  Config cfg = parla::test::toy_config(data, "mismatch-run");
  cfg.training.max_steps = 2;
  Trainer(cfg, {}).run();
  Config other = cfg;
  other.model.d_model = 48;
  other.model.heads = 4;
  other.training.max_steps = 4;
  TrainerOptions o;
  o.resume = cfg.training.save_dir + "/checkpoint_last.pt";
  try {
    Trainer(other, o);
    FAIL("expected a ConfigError");
  } catch (const parla::ConfigError& e) {
    std::string m = e.what();
    CHECK(m.find("model.d_model (checkpoint 32, config 48)") != std::string::npos);
    CHECK(m.find("model.heads (checkpoint 2, config 4)") != std::string::npos);
  }
}

TEST_CASE("a model key missing from an older checkpoint's config counts as its default when resuming") {
  using nlohmann::json;
  json current = parla::config::to_json(Config{});
  json old = current;
  old["model"].erase("encoder_attention");  // a checkpoint written before the key existed
  old["model"].erase("attention_seed");
  CHECK(parla::train::model_config_differences(old, current).empty());
  current["model"]["encoder_attention"] = "sparse";  // now it is not the default: a real difference
  auto diffs = parla::train::model_config_differences(old, current);
  REQUIRE(diffs.size() == 1);
  CHECK(diffs[0] == "model.encoder_attention (checkpoint \"\", config \"sparse\")");
}

TEST_CASE("resuming on a dataset with another vocabulary size names the sizes") {
  auto data = parla::test::toy_dataset("vocab-a", 24);
  Config cfg = parla::test::toy_config(data, "vocab-run");
  cfg.training.max_steps = 2;
  Trainer(cfg, {}).run();
  auto data_b = parla::test::toy_dataset("vocab-b", 30);
  Config other = cfg;
  other.data.dir = data_b;
  TrainerOptions o;
  o.resume = cfg.training.save_dir + "/checkpoint_last.pt";
  CHECK_THROWS_WITH(Trainer(other, o), Catch::Contains("src_vocab_size 24") && Catch::Contains("src_vocab_size 30"));
}

TEST_CASE("missing or corrupt checkpoints and splits give clear errors") {
  auto data = parla::test::toy_dataset("errors");
  Config cfg = parla::test::toy_config(data, "errors-run");
  cfg.training.max_steps = 2;
  TrainerOptions o;
  o.resume = cfg.training.save_dir + "/nope.pt";
  CHECK_THROWS_WITH(Trainer(cfg, o), Catch::Contains("nope.pt"));
  fs::create_directories(cfg.training.save_dir);
  std::ofstream(cfg.training.save_dir + "/corrupt.pt") << "not a checkpoint";
  o.resume = cfg.training.save_dir + "/corrupt.pt";
  CHECK_THROWS_AS(Trainer(cfg, o), parla::DataError);
  fs::remove(data + "/valid.en.idx");
  CHECK_THROWS_WITH(Trainer(cfg, {}), Catch::Contains("valid.en"));
}

TEST_CASE("an existing run is not overwritten without --resume or --overwrite") {
  auto data = parla::test::toy_dataset("exists");
  Config cfg = parla::test::toy_config(data, "exists-run");
  cfg.training.max_steps = 1;
  Trainer(cfg, {}).run();
  CHECK_THROWS_AS(Trainer(cfg, {}), parla::UsageError);
  TrainerOptions o;
  o.overwrite = true;
  CHECK_NOTHROW(Trainer(cfg, o));
}

TEST_CASE("SIGINT saves checkpoint_last and stops after the current update") {
  auto data = parla::test::toy_dataset("signal");
  Config cfg = parla::test::toy_config(data, "signal-run");
  cfg.training.max_steps = 50;
  TrainerOptions o;
  o.faults = std::make_shared<parla::test::SignalAt>(4, SIGINT);
  auto r = Trainer(cfg, o).run();
  parla::train::reset_shutdown();
  CHECK(r.stop_reason == parla::train::StopReason::kSignal);
  CHECK(r.signal == SIGINT);
  CHECK(r.steps == 5);
  auto meta = parla::models::read_meta(cfg.training.save_dir + "/checkpoint_last.pt");
  CHECK(meta.info["step"] == 5);
}

namespace {
// Almost nothing is learned (lr 1e-9): validation improves, if at all, in the last bits of the loss (LibTorch 2.11
// on a Sapphire Rapids guest: at steps 6 and 10), so early stopping comes within a few validations.
void never_improving(Config& cfg) {
  cfg.training.lr = 1e-9;
  cfg.training.warmup_steps = 0;
  cfg.training.schedule = parla::LrScheduleKind::kConstant;
  cfg.training.valid_every = 2;
  cfg.training.patience = 2;
  cfg.training.max_steps = 100;
}
}  // namespace

TEST_CASE("early stopping ends training after `patience` validations without improvement") {
  auto data = parla::test::toy_dataset("early");
  Config cfg = parla::test::toy_config(data, "early-run");
  never_improving(cfg);
  auto r = Trainer(cfg, {}).run();
  CHECK(r.stop_reason == parla::train::StopReason::kEarlyStopping);
  // Exactly `patience` validations (every valid_every steps) after the last improvement, wherever that fell.
  const auto best = parla::models::read_meta(cfg.training.save_dir + "/checkpoint_best.pt");
  const int64_t best_step = best.info["step"];
  CHECK(r.steps == best_step + cfg.training.patience * cfg.training.valid_every);
  CHECK(r.steps < cfg.training.max_steps);
}

TEST_CASE("on a GPU, a run interrupted and resumed gives exactly the losses of an uninterrupted run", "[cuda]") {
  PARLA_REQUIRE_CUDA();
  // Bit-exact repeats on a GPU need deterministic kernels (embedding backward otherwise sums with atomics).
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  auto data = parla::test::toy_dataset("resume-cuda");
  Config full = parla::test::toy_config(data, "resume-cuda-full");
  full.runtime.device = "cuda";
  full.training.max_steps = 30;  // validations at 20 (CUDA generator saved and restored around them)
  auto rf = Trainer(full, {}).run();

  Config part = parla::test::toy_config(data, "resume-cuda-part");
  part.runtime.device = "cuda";
  part.training.max_steps = 13;
  Trainer(part, {}).run();
  auto meta_ok = parla::models::read_meta(part.training.save_dir + "/checkpoint_last.pt");
  CHECK(meta_ok.info["step"] == 13);
  part.training.max_steps = 30;
  TrainerOptions o;
  o.resume = part.training.save_dir + "/checkpoint_last.pt";
  auto rp = Trainer(part, o).run();  // AdamW moments not on the GPU would make its step throw
  CHECK(rp.losses.size() == 17);
  auto lf = parla::test::train_losses(full.training.save_dir), lp = parla::test::train_losses(part.training.save_dir);
  REQUIRE(lf.size() == 30);
  CHECK(lp == lf);
  at::globalContext().setDeterministicAlgorithms(false, false);
}

TEST_CASE("training with runtime.device cuda where no GPU is visible is a ConfigError naming the key") {
  if (torch::cuda::is_available()) return;  // covered by the [cuda] tests there
  auto data = parla::test::toy_dataset("no-gpu");
  Config cfg = parla::test::toy_config(data, "no-gpu-run");
  cfg.training.max_steps = 1;
  cfg.runtime.device = "cuda";
  CHECK_THROWS_AS(Trainer(cfg, {}), parla::ConfigError);
  CHECK_THROWS_WITH(Trainer(cfg, {}), Catch::Contains("runtime.device"));
}

TEST_CASE("parla-train refuses a GPU it cannot use, and cuda:N in a data-parallel world, with exit 2 naming the key") {
  auto data = parla::test::toy_dataset("device-app");
  const std::string save = std::string(PARLA_TEST_TMP_DIR) + "/train/device-app";
  const std::string train = std::string(PARLA_BIN_DIR) + "/parla-train";
  const bool gpu = torch::cuda::is_available();
  // Rank 0 of two: the device is refused before the rendezvous would wait for rank 1.
  auto r = parla::testing::run("/usr/bin/env", {"WORLD_SIZE=2", "RANK=0", "LOCAL_RANK=0", "MASTER_ADDR=127.0.0.1",
                                                "MASTER_PORT=29531", "PARLA_DIST_TIMEOUT=5", train, "--data", data,
                                                "--save-dir", save, "--max-steps", "1", "--device", "cuda:0"});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("runtime.device") != std::string::npos);
  if (gpu) CHECK(r.err.find("WORLD_SIZE") != std::string::npos);
  if (!gpu) {
    auto single = parla::testing::run(train, {"--data", data, "--save-dir", save, "--max-steps", "1", "--device",
                                              "cuda", "--overwrite"});
    INFO(single.err);
    CHECK(single.exit_code == 2);
    CHECK(single.err.find("runtime.device") != std::string::npos);
  }
}

namespace {

// A toy config without dropout: a batch retried as halves draws other dropout masks, so only a dropout-free run
// can be compared with one that was not split.
Config no_dropout_config(const std::string& data, const std::string& save) {
  Config cfg = parla::test::toy_config(data, save);
  cfg.model.dropout = 0;
  cfg.training.max_steps = 15;
  cfg.training.update_freq = 2;
  cfg.training.clip_norm = 0.5;  // the device-side clipping factor takes part
  cfg.training.valid_every = 0;
  return cfg;
}

std::map<std::string, torch::Tensor> final_weights(const Config& cfg) {
  auto model = parla::models::build_seq2seq(cfg.model, 24, 24);
  parla::models::load_weights(cfg.training.save_dir + "/checkpoint_last.pt", *model);
  std::map<std::string, torch::Tensor> out;
  for (const auto& p : model->named_parameters()) out[p.key()] = p.value().detach().clone();
  return out;
}

void check_same_run(const parla::train::TrainResult& a, const parla::train::TrainResult& b, const Config& ca,
                    const Config& cb) {
  REQUIRE(a.losses.size() == b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) CHECK(b.losses[i] == Approx(a.losses[i]).epsilon(1e-6));
  auto wa = final_weights(ca), wb = final_weights(cb);
  REQUIRE(wa.size() == wb.size());
  // The key projections' biases are left out: softmax is invariant to adding a constant to a row of scores, so
  // their exact gradient is zero and what they get is rounding noise, which Adam scales up to steps of size lr.
  const int64_t d = ca.model.d_model;
  auto without_key_bias = [d](const std::string& name, const torch::Tensor& w) {
    auto ends_with = [&](const std::string& s) {
      return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    if (ends_with("qkv_proj.bias")) return torch::cat({w.narrow(0, 0, d), w.narrow(0, 2 * d, d)});  // Q, V
    if (ends_with("kv_proj.bias")) return w.narrow(0, d, d);                                       // V
    return w;
  };
  for (const auto& [name, w] : wa) {
    auto x = without_key_bias(name, w), y = without_key_bias(name, wb.at(name));
    INFO(name << ": max difference " << (x - y).abs().max().item<double>());
    CHECK(torch::allclose(x, y, /*rtol=*/1e-4, /*atol=*/1e-5));
  }
}

}  // namespace

TEST_CASE("a batch that runs out of memory is retried as halves and gives the same update") {
  auto data = parla::test::toy_dataset("oom-data");
  Config plain = no_dropout_config(data, "oom-plain");
  auto rp = Trainer(plain, {}).run();
  CHECK(rp.oom_retries == 0);

  SECTION("out of memory before the forward pass") {
    Config split = no_dropout_config(data, "oom-forward");
    TrainerOptions o;
    // Toy batches hold about 40 sentences: split two or three times.
    o.faults = std::make_shared<parla::test::OutOfMemoryAbove>(10, /*after_backward=*/false);
    auto rs = Trainer(split, o).run();
    CHECK(rs.oom_retries >= 2 * 15);
    check_same_run(rp, rs, plain, split);
  }
  SECTION("out of memory after backward added the batch's gradient: the update starts over") {
    // Were the partial gradient kept, the batch would count twice (or more) and the losses would part at once.
    Config split = no_dropout_config(data, "oom-backward");
    TrainerOptions o;
    o.faults = std::make_shared<parla::test::OutOfMemoryAbove>(10, /*after_backward=*/true);
    auto rs = Trainer(split, o).run();
    CHECK(rs.oom_retries >= 2 * 15);
    check_same_run(rp, rs, plain, split);
  }
}

TEST_CASE("a single sentence that runs out of memory is a data error naming training.batch_tokens") {
  auto data = parla::test::toy_dataset("oom-one-data");
  Config cfg = no_dropout_config(data, "oom-one");
  TrainerOptions o;
  o.faults = std::make_shared<parla::test::OutOfMemoryAbove>(0, /*after_backward=*/false);
  CHECK_THROWS_AS(Trainer(cfg, o).run(), parla::DataError);
  CHECK_THROWS_WITH(Trainer(no_dropout_config(data, "oom-one-b"), o).run(),
                    Catch::Contains("training.batch_tokens") && Catch::Contains("single sentence"));
}

TEST_CASE("the training loop reads the device once per update and once per progress line") {
  // What this proves: every read the loop makes of training figures goes through one counted function, and the
  // loop calls it that often. It cannot see reads hidden inside a task's loss (those were removed by hand:
  // LossTerms holds tensors only) or synchronisations that are not reads (a pageable host-to-device copy).
  auto data = parla::test::toy_dataset("reads-data");
  Config cfg = parla::test::toy_config(data, "reads");
  cfg.training.max_steps = 20;
  cfg.training.log_every = 5;
  cfg.training.valid_every = 0;
  cfg.training.update_freq = 3;
  auto r = Trainer(cfg, {}).run();
  CHECK(r.steps == 20);
  CHECK(r.host_reads == 20 + 20 / 5);  // the last progress line (step 20) leaves nothing to read at the end
  REQUIRE(r.losses.size() == 20);
  for (double l : r.losses) CHECK(std::isfinite(l));
  // The interval means of metrics.jsonl are the per-update losses weighted by their token counts; the first
  // interval's mean lies within the range of its five losses.
  auto logged = parla::test::train_losses(cfg.training.save_dir);
  REQUIRE(logged.size() == 4);
  CHECK(logged[0] >= *std::min_element(r.losses.begin(), r.losses.begin() + 5));
  CHECK(logged[0] <= *std::max_element(r.losses.begin(), r.losses.begin() + 5));

  Config every = parla::test::toy_config(data, "reads-every");
  every.training.max_steps = 7;
  every.training.valid_every = 0;
  TrainerOptions o;
  o.faults = std::make_shared<parla::test::NanLoss>([](int64_t i) { return i == 3; });
  auto re = Trainer(every, o).run();
  CHECK(re.steps == 7);
  CHECK(re.skipped_steps == 1);
  CHECK(std::isnan(re.losses[3]));
  // 8 updates (a flag read each), 7 progress lines, and the skipped update's second read telling NaN from inf.
  CHECK(re.host_reads == 8 + 7 + 1);
}

namespace {

using FileState = std::pair<std::string, fs::file_time_type>;  // bytes, modification time

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::map<std::string, FileState> files_of(const std::string& dir) {
  std::map<std::string, FileState> out;
  for (const auto& e : fs::directory_iterator(dir))
    out[e.path().filename().string()] = {slurp(e.path()), fs::last_write_time(e.path())};
  return out;
}

// Every file of a save_dir with its modification time set an hour back, so that any rewrite shows, even one
// of identical bytes within the file system's timestamp granularity.
std::map<std::string, FileState> age_files(const std::string& dir) {
  const auto past = fs::file_time_type::clock::now() - std::chrono::hours(1);
  for (const auto& e : fs::directory_iterator(dir)) fs::last_write_time(e.path(), past);
  return files_of(dir);
}

void check_untouched(const std::string& dir, const std::map<std::string, FileState>& before) {
  auto now = files_of(dir);
  for (const auto& [name, state] : before) {
    INFO(name);
    REQUIRE(now.count(name));
    CHECK(now[name].first == state.first);
    CHECK(now[name].second == state.second);
  }
  CHECK(now.size() == before.size());  // no new file (checkpoint_<step>.pt) either
}

// The library's log lines while it lives.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)) {
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  std::string text() const { return text_.str(); }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

TrainerOptions resume_last(const Config& cfg) {
  TrainerOptions o;
  o.resume = cfg.training.save_dir + "/checkpoint_last.pt";
  return o;
}

// Resumes a finished run (in process) and checks that it did nothing but say so, naming `limit` and the step.
void check_resume_does_nothing(const Config& cfg, const std::string& reason, const std::string& limit,
                               int64_t steps) {
  auto before = age_files(cfg.training.save_dir);
  for (const char* f : {"checkpoint_last.pt", "checkpoint_best.pt", "metrics.jsonl", "config.json"})
    REQUIRE(before.count(f));
  LogCapture log;
  auto r = Trainer(cfg, resume_last(cfg)).run();
  INFO(log.text());
  CHECK(r.already_finished);
  CHECK(parla::config::name_of(r.stop_reason) == reason);
  CHECK(r.steps == steps);
  CHECK(r.losses.empty());
  CHECK(log.text().find("nothing to do") != std::string::npos);
  CHECK(log.text().find(limit) != std::string::npos);
  CHECK(log.text().find("step " + std::to_string(steps)) != std::string::npos);
  check_untouched(cfg.training.save_dir, before);
}

}  // namespace

TEST_CASE("parla-train --resume of a run that reached training.max_steps exits 0 touching nothing, and a raised "
          "--max-steps trains on") {
  auto data = parla::test::toy_dataset("finished-steps-data");
  Config cfg = parla::test::toy_config(data, "finished-steps");
  cfg.training.max_steps = 8;
  REQUIRE(Trainer(cfg, {}).run().steps == 8);
  const std::string config_file = cfg.training.save_dir + "-config.json";
  std::ofstream(config_file) << parla::config::to_json(cfg).dump(2);
  const std::string train = std::string(PARLA_BIN_DIR) + "/parla-train";

  auto before = age_files(cfg.training.save_dir);
  for (int again = 0; again < 2; ++again) {  // the user's report: every resume added a step and rewrote the files
    auto r = parla::testing::run(train, {"-c", config_file, "--resume"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("nothing to do: training.max_steps = 8 reached (step 8, epoch 1") != std::string::npos);
    check_untouched(cfg.training.save_dir, before);
  }
  CHECK(parla::models::read_meta(cfg.training.save_dir + "/checkpoint_last.pt").info["step"] == 8);

  auto raised = parla::testing::run(train, {"-c", config_file, "--resume", "--max-steps", "11"});
  INFO(raised.err);
  CHECK(raised.exit_code == 0);
  CHECK(raised.err.find("nothing to do") == std::string::npos);
  CHECK(parla::models::read_meta(cfg.training.save_dir + "/checkpoint_last.pt").info["step"] == 11);
  CHECK(parla::test::train_losses(cfg.training.save_dir).size() == 11);
}

TEST_CASE("resuming a run that reached training.max_time trains no further, and a raised max_time trains on") {
  auto data = parla::test::toy_dataset("finished-time-data");
  Config cfg = parla::test::toy_config(data, "finished-time");
  cfg.training.max_time = 0.003;  // minutes: 0.18 s, a few updates
  auto first = Trainer(cfg, {}).run();
  REQUIRE(first.stop_reason == parla::train::StopReason::kMaxTime);
  check_resume_does_nothing(cfg, "max_time", "training.max_time = 0.003 minutes reached", first.steps);

  cfg.training.max_time = 0.006;
  auto more = Trainer(cfg, resume_last(cfg)).run();
  CHECK_FALSE(more.already_finished);
  CHECK(more.stop_reason == parla::train::StopReason::kMaxTime);
  CHECK(more.steps > first.steps);
}

TEST_CASE("resuming a run that reached training.max_epochs trains no further, and a raised max_epochs trains on") {
  auto data = parla::test::toy_dataset("finished-epochs-data");
  Config cfg = parla::test::toy_config(data, "finished-epochs");
  cfg.training.max_epochs = 1;
  auto first = Trainer(cfg, {}).run();
  REQUIRE(first.stop_reason == parla::train::StopReason::kMaxEpochs);
  REQUIRE(first.epoch == 1);
  check_resume_does_nothing(cfg, "max_epochs", "training.max_epochs = 1 reached (epoch 1 complete", first.steps);

  cfg.training.max_epochs = 2;
  auto more = Trainer(cfg, resume_last(cfg)).run();
  CHECK_FALSE(more.already_finished);
  CHECK(more.stop_reason == parla::train::StopReason::kMaxEpochs);
  CHECK(more.epoch == 2);
  CHECK(more.steps > first.steps);
}

TEST_CASE("resuming a run that stopped early (patience) trains no further, and a raised patience trains on") {
  auto data = parla::test::toy_dataset("finished-early-data");
  Config cfg = parla::test::toy_config(data, "finished-early");
  never_improving(cfg);
  auto first = Trainer(cfg, {}).run();
  REQUIRE(first.stop_reason == parla::train::StopReason::kEarlyStopping);
  check_resume_does_nothing(cfg, "early_stopping", "training.patience = 2", first.steps);

  cfg.training.patience = 4;
  auto more = Trainer(cfg, resume_last(cfg)).run();
  CHECK_FALSE(more.already_finished);
  CHECK(more.stop_reason == parla::train::StopReason::kEarlyStopping);
  CHECK(more.steps > first.steps);
}

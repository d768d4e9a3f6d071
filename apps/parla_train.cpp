// parla-train: trains a translation model (Transformer or RNN) or a BERT encoder on a parla-preprocess dataset,
// from the shared JSON config. Flags map onto the `data`, `training` and `runtime` sections; the work is
// parla::train::Trainer. `parla-train average` averages checkpoints (fairseq's average_checkpoints.py).
#include <cstdlib>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "core/app.h"
#include "core/config.h"
#include "core/runtime.h"
#include "train/checkpoint_average.h"
#include "train/trainer.h"

int main(int argc, char** argv) {
  parla::runtime::tune_process(argc, argv);
  parla::app::CommonFlags flags;
  flags.program = "parla-train";
  CLI::App cli(
      "Trains a model from the JSON config on a dataset written by parla-preprocess.\n"
      "Output (--save-dir): checkpoint_last.pt, checkpoint_best.pt, checkpoint_<step>.pt (last K), metrics.jsonl, "
      "config.json.\n"
      "SIGINT/SIGTERM: finishes the current update, saves checkpoint_last.pt and exits with 128+signal "
      "(130/143); continue with --resume.\n"
      "Data-parallel: start one process per rank with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set (torchrun's "
      "env:// convention).\n"
      "Example: parla-train -c config.json --data data/de-en -o runs/base --max-steps 100000",
      "parla-train");
  parla::app::add_config_flags(cli, flags);
  std::string data_dir, save_dir, resume, device, precision, init_encoder;
  int64_t max_steps = 0, seed = 0;
  int max_epochs = 0, threads = 0, batch_tokens = 0, update_freq = 0;
  double lr = 0, max_time = 0;
  bool overwrite = false;
  cli.add_option("--data", data_dir, "Dataset directory written by parla-preprocess (data.dir)");
  cli.add_option("-o,--save-dir", save_dir, "Output directory for checkpoints and logs (training.save_dir)");
  auto* resume_opt =
      cli.add_option("--resume", resume,
                     "Continue training from a checkpoint: PATH, or without a value SAVE_DIR/checkpoint_last.pt")
          ->expected(0, 1);
  cli.add_flag("--overwrite", overwrite, "Start fresh even if --save-dir already holds a checkpoint_last.pt");
  cli.add_option("--max-steps,--max-update", max_steps, "Stop after this many updates (training.max_steps)");
  cli.add_option("--max-epochs,--max-epoch", max_epochs, "Stop after this many epochs (training.max_epochs)");
  cli.add_option("--max-time", max_time, "Stop after this many minutes of training (training.max_time)");
  cli.add_option("--lr", lr, "Peak learning rate (training.lr)");
  cli.add_option("--batch-tokens,--max-tokens", batch_tokens, "Token budget per batch (training.batch_tokens)");
  cli.add_option("--update-freq", update_freq, "Batches accumulated per update (training.update_freq)");
  cli.add_option("--init-encoder-from", init_encoder,
                 "BERT checkpoint whose encoder initialises the model (training.init_encoder_from)");
  cli.add_option("--seed", seed, "Random seed (runtime.seed)");
  cli.add_option("--threads", threads, "Compute threads, 0 = all cores (runtime.threads)");
  cli.add_option("--device", device, "cpu, cuda, cuda:N or auto (runtime.device)");
  cli.add_option("--precision", precision,
                 "fp32, bf16 or fp16 (CUDA; dynamic loss scaling): autocast of forward and loss (training.precision)");

  // parla-train average -o OUT CKPT...
  std::string average_out;
  std::vector<std::string> average_inputs;
  int average_last = 0;
  std::string average_dir;
  auto* avg = cli.add_subcommand("average", "Average the parameters of several checkpoints into one "
                                            "(fairseq's average_checkpoints, Marian's average.py)");
  avg->add_option("-o,--output", average_out, "Output checkpoint")->required();
  avg->add_option("checkpoints", average_inputs, "Checkpoints to average");
  avg->add_option("--last", average_last, "Average the last N checkpoint_<step>.pt of --dir instead");
  avg->add_option("--dir", average_dir, "Directory for --last (a training save_dir)");

  return parla::app::run(cli, flags, argc, argv, [&]() -> int {
    if (avg->parsed()) {
      std::vector<std::string> inputs = average_inputs;
      if (average_last > 0) {
        if (average_dir.empty()) throw parla::UsageError("average --last N needs --dir SAVE_DIR");
        inputs = parla::train::last_checkpoints(average_dir, average_last);
      }
      if (inputs.empty()) throw parla::UsageError("average: give checkpoints, or --last N --dir SAVE_DIR");
      parla::train::average_checkpoints(inputs, average_out);
      spdlog::info("averaged {} checkpoints into '{}'", inputs.size(), average_out);
      return 0;
    }
    auto builder = parla::app::start_config(flags);
    auto set_str = [&](const char* key, const std::string& v, const char* flag) {
      if (!v.empty()) builder.set(key, v, flag);
    };
    set_str("data.dir", data_dir, "--data");
    set_str("training.save_dir", save_dir, "--save-dir");
    set_str("training.init_encoder_from", init_encoder, "--init-encoder-from");
    set_str("runtime.device", device, "--device");
    set_str("training.precision", precision, "--precision");
    parla::app::set_if_given(cli, builder, "--max-steps", "training.max_steps", max_steps);
    parla::app::set_if_given(cli, builder, "--max-epochs", "training.max_epochs", max_epochs);
    parla::app::set_if_given(cli, builder, "--max-time", "training.max_time", max_time);
    parla::app::set_if_given(cli, builder, "--lr", "training.lr", lr);
    parla::app::set_if_given(cli, builder, "--batch-tokens", "training.batch_tokens", batch_tokens);
    parla::app::set_if_given(cli, builder, "--update-freq", "training.update_freq", update_freq);
    parla::app::set_if_given(cli, builder, "--seed", "runtime.seed", seed);
    parla::app::set_if_given(cli, builder, "--threads", "runtime.threads", threads);
    parla::Config config = builder.build();
    if (parla::app::dump_config_if_asked(flags, config)) return 0;
    parla::train::check_training_config(config);
    parla::runtime::apply(config.runtime);

    parla::train::TrainerOptions options;
    options.overwrite = overwrite;
    if (resume_opt->count() > 0)
      options.resume = resume.empty() ? config.training.save_dir + "/checkpoint_last.pt" : resume;
    parla::train::Trainer trainer(config, options);
    auto result = trainer.run();
    return result.signal != 0 ? 128 + result.signal : 0;
  });
}

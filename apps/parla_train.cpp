// parla-train: trains a translation model (Transformer or RNN) or a BERT encoder on a parla-preprocess dataset,
// from the shared JSON config. Its flags are those of the `training` and `runtime` config keys and data.dir
// (core/schema_flags.h); the work is parla::train::Trainer. `parla-train average` averages checkpoints
// (fairseq's average_checkpoints.py); `parla-train quantize` writes an int8 checkpoint for CPU decoding
// (CTranslate2's int8 conversion); `parla-train upgrade` rewrites an old (TorchScript) checkpoint as safetensors.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "core/app.h"
#include "core/config.h"
#include "core/schema_flags.h"
#include "runtime/runtime.h"
#include "train/checkpoint_average.h"
#include "train/checkpoint_upgrade.h"
#include "train/fine_tuning.h"
#include "train/quantize_checkpoint.h"
#include "train/trainer.h"

int parla_train_main(int argc, char** argv) {
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
  // The flags of the `training` and `runtime` keys and data.dir come from the schema (docs/CONFIG.md).
  parla::app::SchemaFlags schema_flags(cli, {"data.dir", "training", "runtime"});
  std::string resume;
  bool overwrite = false;
  auto* resume_opt =
      cli.add_option("--resume", resume,
                     "Continue training from a checkpoint: PATH, or without a value SAVE_DIR/checkpoint_last.pt")
          ->expected(0, 1);
  cli.add_flag("--overwrite", overwrite, "Start fresh even if --save-dir already holds a checkpoint_last.pt");

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

  // parla-train quantize|upgrade -o OUT CKPT: one checkpoint in, one out.
  struct OneToOne {
    std::string out, in;
    CLI::App* app;
  };
  auto one_to_one = [&](const char* name, const std::string& help, const char* input_help) {
    auto o = std::make_unique<OneToOne>();
    o->app = cli.add_subcommand(name, help);
    o->app->add_option("-o,--output", o->out, "Output checkpoint")->required();
    o->app->add_option("checkpoint", o->in, input_help)->required();
    return o;
  };
  const auto quant = one_to_one("quantize",
                                "Write an int8 copy of a translation checkpoint for CPU decoding (weights per output "
                                "channel, about 4x smaller); parla-translate loads it directly",
                                "Float checkpoint to quantize");
  const auto upgrade = one_to_one("upgrade",
                                  "Rewrite a checkpoint of an earlier parla (a TorchScript archive, read without "
                                  "running any of its code) as safetensors, with its optimizer and training state, "
                                  "so --resume continues exactly",
                                  "Checkpoint to rewrite");

  return parla::app::run(cli, flags, argc, argv, [&]() -> int {
    if (upgrade->app->parsed()) {
      const int format = parla::train::upgrade_checkpoint(upgrade->in, upgrade->out);
      spdlog::info("wrote '{}' (safetensors) from '{}' (format {})", upgrade->out, upgrade->in, format);
      return 0;
    }
    if (quant->app->parsed()) {
      parla::train::quantize_checkpoint(quant->in, quant->out);
      spdlog::info("wrote the int8 checkpoint '{}'", quant->out);
      return 0;
    }
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
    schema_flags.apply(builder);
    // training.init_from: the model section is the checkpoint's (train/fine_tuning.h).
    parla::Config config = parla::train::fine_tuning_config(builder);
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

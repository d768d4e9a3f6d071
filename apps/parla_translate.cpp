// parla-translate: raw text in, detokenised translations out (one output line per input line, in input order).
// Its flags are those of the `decoding` and `runtime` config keys (core/schema_flags.h); the work is
// parla::decode::FileTranslator over a TranslationModel.
#include <unistd.h>

#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "core/app.h"
#include "core/config.h"
#include "core/lean_load.h"
#include "runtime/runtime.h"
#include "runtime/runtime_device.h"
#include "core/schema_flags.h"
#include "decode/translate_file.h"
#include "decode/translation_model.h"
#include "decode/translator.h"

int parla_translate_main(int argc, char** argv) {
  parla::runtime::tune_process(argc, argv);
  std::ios::sync_with_stdio(false);
  parla::app::CommonFlags flags;
  flags.program = "parla-translate";
  CLI::App cli("Translates raw text with one or more parla checkpoints (several -m: an ensemble averaging "
               "log-probabilities). Reads stdin and writes stdout unless -i/-o are given; one output line per "
               "input line, in input order; an empty line gives an empty line.\n"
               "Output formats: 'translation'; with --n-best N: 'i ||| translation ||| score' (i = 0-based line); "
               "with --alignment hard: ' ||| s-t ...' appended (source-target SentencePiece positions, Moses "
               "style); --alignment soft: ' ||| w,w,... w,w,...' (attention per target piece incl. EOS, render with "
               "tools/attention-heatmap.py).\n"
               "Example: parla-translate -m model.pt -b 5 < input.de > output.en",
               "parla-translate");
  parla::app::add_config_flags(cli, flags);
  // Every decoding and runtime key with command-line names (docs/CONFIG.md) is a flag; only these are not keys.
  parla::app::SchemaFlags schema_flags(cli, {"decoding", "runtime"});
  std::vector<std::string> models;
  std::string input = "-", output = "-";
  cli.add_option("-m,--models,--model", models, "Checkpoint(s) to translate with; several form an ensemble")
      ->expected(1, -1);
  cli.add_option("-i,--input", input, "Input text file ('-' = stdin)")->capture_default_str();
  cli.add_option("-o,--output", output, "Output file ('-' = stdout); written to a temporary file, renamed when done "
                 "(a FIFO or device is written in place)")
      ->capture_default_str();

  parla::app::end_process(parla::app::run(cli, flags, argc, argv, [&] {
    auto builder = parla::app::start_config(flags);
    schema_flags.apply(builder);
    if ((input.empty() || input == "-") && isatty(STDIN_FILENO) && !builder.given("decoding.line_buffered"))
      builder.set("decoding.line_buffered", true, "stdin is a terminal");
    parla::Config config = builder.build();
    if (parla::app::dump_config_if_asked(flags, config)) return 0;
    if (models.empty()) throw parla::UsageError("no model given: pass a checkpoint with -m/--models");
    int used = parla::runtime::apply(config.runtime);
    spdlog::debug("{} threads", used);
    // Errors name the flag when the value came from it.
    const auto dev = parla::runtime::resolve_device(
        {config.runtime.device, schema_flags.origin("runtime.device"), 1, 0});
    spdlog::debug("decoding on {}", parla::runtime::describe_device(dev));
    // The model loads between two page-outs (core/lean_load.h): this process translates from now on.
    parla::decode::Translator translator(
        parla::load_lean([&] { return parla::decode::TranslationModel::load(models, config.decoding, dev); }),
        static_cast<uint64_t>(config.runtime.seed));
    parla::decode::FileTranslator file_translator(translator, config.decoding, config.runtime.inter_threads, used);
    if (config.runtime.inter_threads > 1)
      spdlog::info("{} workers of {} thread{} each (runtime.inter_threads, runtime.threads)",
                   config.runtime.inter_threads, used, used == 1 ? "" : "s");
    parla::decode::translate_file(file_translator, input, output);
    return 0;
  }));
}

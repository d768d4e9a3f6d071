// parla-preprocess: a line-aligned parallel corpus in, a training-ready dataset directory out (cleaned,
// split, SentencePiece vocabulary, binarized token ids; docs/DATASET.md). Its flags are those of the `data`
// and `vocab` config keys (core/schema_flags.h); the work is parla::data::preprocess.
#include <CLI/CLI.hpp>

#include "core/app.h"
#include "core/config.h"
#include "core/schema_flags.h"
#include "data/preprocess.h"
#include "models/checkpoint.h"

int parla_preprocess_main(int argc, char** argv) {
  parla::app::CommonFlags flags;
  flags.program = "parla-preprocess";
  CLI::App cli("Cleans a line-aligned parallel corpus (plain or .gz), splits off validation and test sets, "
               "trains a SentencePiece vocabulary (or takes a checkpoint's: --vocab-from) and writes the binarized dataset "
               "parla-train reads.\n"
               "Europarl's source release (one file per day and language, with its markup) is first split into "
               "sentences and aligned: --europarl-release DIR.\n"
               "Example: parla-preprocess --prefix europarl-v7.de-en --src-lang de --tgt-lang en -o data/de-en\n"
               "Example: parla-preprocess --europarl-release europarl/txt --src-lang fr --tgt-lang en -o data/fr-en",
               "parla-preprocess");
  parla::app::add_config_flags(cli, flags);
  // The flags of the `data`, `vocab` and runtime keys come from the schema (docs/CONFIG.md); -o names the output.
  parla::app::SchemaFlags schema_flags(cli, {"data", "vocab", "runtime.threads", "runtime.seed"},
                                      {{"data.dir", "-o,--output,--destdir"}});
  bool force = false;
  cli.add_flag("-f,--force", force, "Replace the output directory if it exists");

  return parla::app::run(cli, flags, argc, argv, [&] {
    auto builder = parla::app::start_config(flags);
    schema_flags.apply(builder);
    parla::Config config = builder.build();
    if (parla::app::dump_config_if_asked(flags, config)) return 0;
    parla::data::PreprocessOptions options;
    options.force = force;
    // --vocab-from: encode with a checkpoint's vocabularies (to fine-tune it) instead of training SentencePiece.
    if (const auto& ckpt = config.vocab.from_checkpoint; !ckpt.empty()) {
      const auto meta = parla::models::read_meta(ckpt);
      options.vocab = parla::data::ExistingVocab{parla::models::source_vocab(meta, ckpt),
                                                 parla::models::target_vocab(meta, ckpt), ckpt, meta.control_pieces,
                                                 meta.languages};
    }
    parla::data::preprocess(config, options);
    return 0;
  });
}

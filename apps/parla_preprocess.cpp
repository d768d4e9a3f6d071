// parla-preprocess: a line-aligned parallel corpus in, a training-ready dataset directory out (cleaned,
// split, SentencePiece vocabulary, binarized token ids; docs/DATASET.md). Flags map onto the `data`, `vocab`
// and `runtime` config sections; the work is parla::data::preprocess.
#include <CLI/CLI.hpp>

#include "core/app.h"
#include "core/config.h"
#include "data/preprocess.h"

int main(int argc, char** argv) {
  parla::app::CommonFlags flags;
  flags.program = "parla-preprocess";
  CLI::App cli("Cleans a line-aligned parallel corpus (plain or .gz), splits off validation and test sets, "
               "trains a SentencePiece vocabulary and writes the binarized dataset parla-train reads.\n"
               "Example: parla-preprocess --prefix europarl-v7.de-en --src-lang de --tgt-lang en -o data/de-en",
               "parla-preprocess");
  parla::app::add_config_flags(cli, flags);
  std::string prefix, src_lang, tgt_lang, train_src, train_tgt, valid_prefix, test_prefix, output, model_type;
  int vocab_size = 0;
  bool force = false;
  cli.add_option("--prefix", prefix, "Training corpus prefix: reads PREFIX.SRC and PREFIX.TGT (or .gz) (data.train_prefix)");
  cli.add_option("-s,--src-lang,--source-lang", src_lang, "Source language suffix, e.g. de (data.src_lang)");
  cli.add_option("-t,--tgt-lang,--target-lang", tgt_lang, "Target language suffix, e.g. en (data.tgt_lang)");
  cli.add_option("--train-src", train_src, "Explicit source training file instead of --prefix (data.train_src)");
  cli.add_option("--train-tgt", train_tgt, "Explicit target training file instead of --prefix (data.train_tgt)");
  cli.add_option("--valid-prefix", valid_prefix,
                 "Separate validation set PREFIX.SRC/PREFIX.TGT; otherwise data.valid_size pairs are split off "
                 "(data.valid_prefix)");
  cli.add_option("--test-prefix", test_prefix,
                 "Separate test set; otherwise data.test_size pairs are split off (data.test_prefix)");
  cli.add_option("-o,--output,--destdir", output, "Output dataset directory (data.dir)");
  cli.add_option("--vocab-size", vocab_size, "SentencePiece vocabulary size (vocab.vocab_size)");
  cli.add_option("--model-type", model_type, "SentencePiece model type: unigram or bpe (vocab.model_type)");
  cli.add_flag("-f,--force", force, "Replace the output directory if it exists");

  return parla::app::run(cli, flags, argc, argv, [&] {
    auto builder = parla::app::start_config(flags);
    auto set = [&](const char* key, const std::string& value, const char* flag) {
      if (!value.empty()) builder.set(key, value, flag);
    };
    set("data.train_prefix", prefix, "--prefix");
    set("data.src_lang", src_lang, "--src-lang");
    set("data.tgt_lang", tgt_lang, "--tgt-lang");
    set("data.train_src", train_src, "--train-src");
    set("data.train_tgt", train_tgt, "--train-tgt");
    set("data.valid_prefix", valid_prefix, "--valid-prefix");
    set("data.test_prefix", test_prefix, "--test-prefix");
    set("data.dir", output, "--output");
    set("vocab.model_type", model_type, "--model-type");
    parla::app::set_if_given(cli, builder, "--vocab-size", "vocab.vocab_size", vocab_size);
    parla::Config config = builder.build();
    if (parla::app::dump_config_if_asked(flags, config)) return 0;
    parla::data::preprocess(config, {force});
    return 0;
  });
}

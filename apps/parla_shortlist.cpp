// parla-shortlist: builds a lexical shortlist (decode/lexical_shortlist.h) for a model from parallel text, the
// decoding.shortlist file of parla-translate and parla-serve (as Marian's shortlists and CTranslate2's vocabulary
// maps; the file is in the latter's format, so ct2 converters take it too).
#include <string>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "core/app.h"
#include "core/error.h"
#include "decode/lexical_shortlist.h"
#include "models/checkpoint.h"
#include "runtime/runtime.h"

int parla_shortlist_main(int argc, char** argv) {
  parla::runtime::tune_process(argc, argv);
  parla::app::CommonFlags flags;
  flags.program = "parla-shortlist";
  CLI::App cli(
      "Builds a lexical shortlist for decoding.shortlist from parallel text (the model's training data):\n"
      "  parla-shortlist -m model.pt --source train.en --target train.de -o shortlist.txt\n"
      "Each source piece keeps the --best target pieces that co-occur with it most (Dice coefficient over sentence\n"
      "pairs); the --frequent most frequent target pieces are always allowed. The output is a CTranslate2\n"
      "vocabulary map ('SOURCE<TAB>TARGET ...' per line), written atomically.",
      "parla-shortlist");
  parla::app::add_logging_flags(cli, flags);
  std::string model, source, target, output;
  parla::decode::ShortlistOptions o;
  cli.add_option("-m,--model", model, "Checkpoint whose SentencePiece models segment the text")->required();
  cli.add_option("--source", source, "Source side, one sentence per line")->required();
  cli.add_option("--target", target, "Target side, line by line with --source")->required();
  cli.add_option("-o,--output", output, "Shortlist file to write")->required();
  cli.add_option("--best", o.best, "Target pieces kept per source piece")->capture_default_str()->check(
      CLI::Range(1, 1 << 20));
  cli.add_option("--frequent", o.frequent, "Most frequent target pieces, always allowed")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 24));
  cli.add_option("--max-sentences", o.max_sentences,
                 "Sentence pairs read, the first ones (0 = all; counting keeps every co-occurring pair in memory)")
      ->capture_default_str();
  return parla::app::run(cli, flags, argc, argv, [&]() -> int {
    const auto meta = parla::models::read_meta(model);
    if (meta.src_spm.empty() || meta.tgt_spm.empty())
      throw parla::DataError("checkpoint " + model + " carries no SentencePiece model to segment the text with");
    const auto src_vocab = parla::models::source_vocab(meta, model);
    const auto tgt_vocab = parla::models::target_vocab(meta, model);
    const auto shortlist = parla::decode::build_shortlist(source, target, src_vocab, tgt_vocab, o);
    shortlist.save(output, src_vocab, tgt_vocab);
    spdlog::info("wrote {}: {} pieces always allowed, {} source pieces with up to {} candidates each", output,
                 shortlist.always().size(), shortlist.rules(1).size(), o.best);
    return 0;
  });
}

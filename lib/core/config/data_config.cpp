#include "core/config/data_config.h"

namespace parla {

const config::SectionSchema<CleanConfig>& CleanConfig::schema() {
  using namespace config;
  static const SectionSchema<CleanConfig> s = [] {
    SectionSchema<CleanConfig> s("data.clean", "Cleaning steps of parla-preprocess; each is counted in stats.json.");
    s.add("remove_markup", &CleanConfig::remove_markup,
          "Drop Europarl markup lines (`<CHAPTER ...>`, `<SPEAKER ...>`, `<P>`).");
    s.add("normalize_whitespace", &CleanConfig::normalize_whitespace, "Strip and collapse runs of whitespace.");
    s.add("remove_control", &CleanConfig::remove_control, "Delete control characters.");
    s.add("unicode_normalization", &CleanConfig::unicode_normalization, "Unicode normalisation of every line.");
    s.add("drop_empty", &CleanConfig::drop_empty, "Drop pairs where either side is empty after cleaning.");
    s.add("max_tokens", &CleanConfig::max_tokens,
          "Drop pairs where either side has more whitespace-separated tokens than this (0 = no limit).",
          at_least(0));
    s.add("max_length_ratio", &CleanConfig::max_length_ratio,
          "Drop pairs whose longer side has more than this many times the tokens of the shorter (0 = off).",
          at_least(0));
    s.add("drop_duplicates", &CleanConfig::drop_duplicates, "Drop exact duplicate pairs (keeps the first).");
    s.add("drop_identical", &CleanConfig::drop_identical, "Drop pairs whose source and target are identical.");
    return s;
  }();
  return s;
}

const config::SectionSchema<DataConfig>& DataConfig::schema() {
  using namespace config;
  static const SectionSchema<DataConfig> s = [] {
    SectionSchema<DataConfig> s("data", "The parallel corpus and the preprocessed dataset.");
    s.add("src_lang", &DataConfig::src_lang, "Source language suffix of the corpus files, e.g. `de`.")
        .flag("-s,--src-lang,--source-lang");
    s.add("tgt_lang", &DataConfig::tgt_lang, "Target language suffix of the corpus files, e.g. `en`.")
        .flag("-t,--tgt-lang,--target-lang");
    s.add("train_prefix", &DataConfig::train_prefix,
          "Training corpus prefix: reads `PREFIX.SRC_LANG` and `PREFIX.TGT_LANG` (or `.gz`).")
        .flag("--prefix,--trainpref");
    s.add("train_src", &DataConfig::train_src, "Explicit source file (instead of `train_prefix`).").flag("--train-src");
    s.add("train_tgt", &DataConfig::train_tgt, "Explicit target file (instead of `train_prefix`).").flag("--train-tgt");
    s.add("europarl_release", &DataConfig::europarl_release,
          "Europarl's source release instead of a line-aligned corpus: a folder holding `SRC_LANG/` and "
          "`TGT_LANG/` (or `txt/SRC_LANG/`...) of day files `ep-YY-MM-DD.txt`; the days of both languages are "
          "split into sentences and aligned (markup anchors, Gale & Church) before cleaning.")
        .flag("--europarl-release");
    s.add("aligned_out", &DataConfig::aligned_out,
          "With `europarl_release`: also write the aligned pairs, before cleaning, as `PREFIX.SRC_LANG` and "
          "`PREFIX.TGT_LANG`, one sentence per line.")
        .flag("--aligned-out");
    s.add("valid_prefix", &DataConfig::valid_prefix, "Optional separate validation set prefix.")
        .flag("--valid-prefix,--validpref");
    s.add("test_prefix", &DataConfig::test_prefix, "Optional separate test set prefix.")
        .flag("--test-prefix,--testpref");
    s.add("valid_size", &DataConfig::valid_size,
          "Pairs split off (seeded, deterministic) for validation when no `valid_prefix` is given.", at_least(0))
        .flag("--valid-size");
    s.add("test_size", &DataConfig::test_size,
          "Pairs split off (seeded, deterministic) for test when no `test_prefix` is given.", at_least(0))
        .flag("--test-size");
    s.add("held_out", &DataConfig::held_out,
          "How the validation and test pairs are taken from the corpus when no separate files are given: "
          "`random` (seeded, `valid_size`/`test_size` pairs), `last` (the corpus's last `test_size` pairs are test, "
          "the `valid_size` before them valid: for corpora in document order, whose neighbouring lines repeat "
          "each other) or `documents` (every pair of the documents `valid_documents`/`test_documents` name, "
          "by the ids in `docids`).")
        .flag("--held-out");
    s.add("docids", &DataConfig::docids,
          "With `held_out = documents`: a file (plain or .gz) with one document id per line of the training "
          "corpus, e.g. Europarl's session day `ep-01-09-03`.")
        .flag("--docids");
    s.add("valid_documents", &DataConfig::valid_documents,
          "With `held_out = documents`: document id prefixes whose pairs are the validation set, e.g. `ep-01-07`.")
        .flag("--valid-documents");
    s.add("test_documents", &DataConfig::test_documents,
          "With `held_out = documents`: document id prefixes whose pairs are the test set, e.g. `ep-01-09` (a "
          "month).")
        .flag("--test-documents");
    s.add("dir", &DataConfig::dir,
          "Preprocessed dataset directory: written by parla-preprocess (there also `-o`, `--output`, "
          "`--destdir`), read by parla-train.")
        .flag("--data");
    s.add("pad_to_multiple", &DataConfig::pad_to_multiple,
          "parla-train: the source and target lengths of every batch are padded up to a multiple of this, and "
          "sentences are batched by their padded lengths, so that a GPU sees a few batch shapes per epoch (each new "
          "shape costs it a cuBLAS heuristic and allocator blocks) and tensor-core friendly sizes. 0 = 8 on CUDA and "
          "1 (exact lengths) elsewhere. The translation task only.",
          at_least(0));
    return s;
  }();
  return s;
}

}  // namespace parla

#pragma once
// Sections "data" and "data.clean": where the parallel corpus is and how parla-preprocess cleans it.
#include <string>
#include <vector>

#include "core/config/schema.h"

namespace parla {

enum class UnicodeNormalization { kNone, kNfc, kNfkc };
// How validation and test pairs are taken from the corpus: seeded at random, the corpus's end, or whole documents.
enum class HeldOut { kRandom, kLast, kDocuments };

struct CleanConfig {
  bool remove_markup = true;         // drop Europarl's <CHAPTER ...>, <SPEAKER ...>, <P> lines
  bool normalize_whitespace = true;  // strip and collapse runs of whitespace
  bool remove_control = true;        // delete control characters (C0/C1 except tab, which becomes a space)
  UnicodeNormalization unicode_normalization = UnicodeNormalization::kNone;
  bool drop_empty = true;            // drop pairs with an empty side
  int max_tokens = 250;              // drop pairs with a side longer than this many whitespace tokens (0 = off)
  double max_length_ratio = 9.0;     // drop pairs whose token-length ratio exceeds this (0 = off)
  bool drop_duplicates = true;       // drop exact duplicate pairs
  bool drop_identical = false;       // drop pairs whose two sides are identical

  static const config::SectionSchema<CleanConfig>& schema();
};

struct DataConfig {
  std::string src_lang;     // source language suffix, e.g. "de"
  std::string tgt_lang;     // target language suffix, e.g. "en"
  std::string train_prefix; // reads PREFIX.SRC_LANG and PREFIX.TGT_LANG (or .gz)
  std::string train_src;    // explicit paths instead of a prefix
  std::string train_tgt;
  std::string europarl_release;  // Europarl's source release (SRC/ and TGT/ folders of day files) instead
  std::string aligned_out;       // also write the release's aligned pairs as PREFIX.SRC / PREFIX.TGT
  std::string valid_prefix; // optional separate validation set
  std::string test_prefix;  // optional separate test set
  int valid_size = 1000;    // sentences split off for validation when no valid_prefix is given
  int test_size = 1000;     // sentences split off for test when no test_prefix is given
  HeldOut held_out = HeldOut::kRandom;  // how they are chosen
  std::string docids;       // one document id per corpus line (Europarl's day), for held_out = documents
  std::vector<std::string> valid_documents, test_documents;  // document id prefixes held out
  std::string dir;          // the preprocessed dataset directory (parla-preprocess output, parla-train input)
  int pad_to_multiple = 0;  // training batches' lengths padded up to a multiple of this; 0 = 8 on CUDA, else 1
  CleanConfig clean;

  static const config::SectionSchema<DataConfig>& schema();
};

}  // namespace parla

PARLA_CHOICES(parla::UnicodeNormalization, {parla::UnicodeNormalization::kNone, "none"},
              {parla::UnicodeNormalization::kNfc, "nfc"}, {parla::UnicodeNormalization::kNfkc, "nfkc"});
PARLA_CHOICES(parla::HeldOut, {parla::HeldOut::kRandom, "random"}, {parla::HeldOut::kLast, "last"},
              {parla::HeldOut::kDocuments, "documents"});

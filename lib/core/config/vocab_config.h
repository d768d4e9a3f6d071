#pragma once
// Section "vocab": SentencePiece vocabulary training (parla-preprocess).
#include <string>
#include <vector>

#include "core/config/schema.h"

namespace parla {

enum class SubwordModel { kUnigram, kBpe };  // SentencePiece's model types

struct VocabConfig {
  // bpe by default: SentencePiece's unigram trainer needs ~20 bytes per character of the sample (3-4 GB for a
  // 1M-sentence Europarl sample), BPE a few hundred MB (text/sentencepiece_training.h).
  SubwordModel model_type = SubwordModel::kBpe;
  int vocab_size = 8000;  // pieces per model, including the four special ids (a soft limit: small corpora get fewer)
  bool joint = true;      // one model for both languages (shared embeddings need it) or one per language
  double character_coverage = 0.9995;  // share of characters covered by the alphabet; the rest fall back
  int64_t sample_sentences = 1000000;  // at most this many training sentences are sampled for SentencePiece
  bool byte_fallback = true;  // rare characters become UTF-8 byte pieces instead of <unk>, so decoding is lossless
  std::vector<std::string> user_defined_symbols;  // pieces never split (e.g. tags)
  // SentencePiece's normalisation. Its default nmt_nfkc rewrites characters users expect back ("…" -> "...",
  // "²" -> "2"); identity keeps decode(encode(x)) == x for every cleaned line. Normalise in data.clean instead.
  std::string normalization_rule = "identity";
  // A parla checkpoint whose SentencePiece models and piece tables encode the corpus instead of newly trained
  // ones (fine-tuning it, e.g. an imported OPUS-MT model); the other vocab keys are then unused.
  std::string from_checkpoint;
  // With a multilingual from_checkpoint (M2M-100, NLLB-200): the model's codes of the corpus's two sides, whose
  // language tokens start every source and target; empty: data.src_lang / data.tgt_lang.
  std::string src_lang_code, tgt_lang_code;

  static const config::SectionSchema<VocabConfig>& schema();
};

}  // namespace parla

PARLA_CHOICES(parla::SubwordModel, {parla::SubwordModel::kUnigram, "unigram"}, {parla::SubwordModel::kBpe, "bpe"});

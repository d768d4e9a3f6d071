#include "core/config/vocab_config.h"

namespace parla {

const config::SectionSchema<VocabConfig>& VocabConfig::schema() {
  using namespace config;
  static const SectionSchema<VocabConfig> s = [] {
    SectionSchema<VocabConfig> s("vocab", "SentencePiece vocabulary training (parla-preprocess).");
    s.add("model_type", &VocabConfig::model_type,
          "SentencePiece model type. `bpe` (default) trains from word counts in a few hundred MB; `unigram` "
          "needs ~20 bytes per character of the sample (about 3.5 GB for 1M Europarl sentences).").flag("--model-type");
    s.add("vocab_size", &VocabConfig::vocab_size,
          "Pieces per SentencePiece model, special ids included; a soft limit (a corpus too small for it gets a "
          "smaller vocabulary, with a warning).",
          at_least(8)).flag("--vocab-size");
    s.add("joint", &VocabConfig::joint, "One SentencePiece model for both languages (else one per language).");
    s.add("character_coverage", &VocabConfig::character_coverage,
          "Share of characters covered by the alphabet (SentencePiece `character_coverage`).", between(0.5, 1.0))
        .flag("--character-coverage");
    s.add("sample_sentences", &VocabConfig::sample_sentences,
          "At most this many training sentences (seeded sample) train SentencePiece; joint models sample "
          "half from each side.",
          at_least(100));
    s.add("byte_fallback", &VocabConfig::byte_fallback,
          "Rare characters become UTF-8 byte pieces instead of `<unk>` (lossless decoding).");
    s.add("user_defined_symbols", &VocabConfig::user_defined_symbols,
          "Pieces SentencePiece never splits, e.g. tags (must not contain commas or whitespace).");
    s.add("normalization_rule", &VocabConfig::normalization_rule,
          "SentencePiece normalisation rule. `identity` (default) keeps decode(encode(line)) == line; SentencePiece's "
          "own default `nmt_nfkc` rewrites e.g. `…` to `...`. Unicode normalisation belongs in "
          "`data.clean.unicode_normalization`.",
          one_of({"identity", "nfkc", "nmt_nfkc", "nfkc_cf", "nmt_nfkc_cf"}));
    s.add("from_checkpoint", &VocabConfig::from_checkpoint,
          "A parla checkpoint (e.g. one `parla-convert` imported) whose vocabularies encode the corpus instead of "
          "newly trained SentencePiece models, so that `training.init_from` can fine-tune it; the other `vocab` "
          "keys are then unused.")
        .flag("--vocab-from");
    s.add("src_lang_code", &VocabConfig::src_lang_code,
          "With a multilingual `vocab.from_checkpoint` (M2M-100, NLLB-200): the model's code of the source side (e.g. "
          "`eng_Latn`), whose token starts every source as the model's tokenizer places it; empty: `data.src_lang`.")
        .flag("--src-lang-code");
    s.add("tgt_lang_code", &VocabConfig::tgt_lang_code,
          "With a multilingual `vocab.from_checkpoint`: the model's code of the target side (e.g. `deu_Latn`), whose "
          "token starts every target (the decoder is trained to produce it after </s>, and it is forced when "
          "translating); empty: `data.tgt_lang`.")
        .flag("--tgt-lang-code");
    s.on_finalize([](VocabConfig& v, const std::set<std::string>&) {
      for (const auto& sym : v.user_defined_symbols) {
        if (sym.empty() || sym.find_first_of(", \t\n") != std::string::npos)
          throw ConfigError("key 'vocab.user_defined_symbols': symbol '" + sym +
                            "' is empty or contains a comma or whitespace");
      }
      for (const auto& [key, code] : {std::pair{"src_lang_code", &v.src_lang_code}, std::pair{"tgt_lang_code", &v.tgt_lang_code}})
        if (!code->empty() && v.from_checkpoint.empty())
          throw ConfigError(std::string("key 'vocab.") + key + "' names a language token of a multilingual model, "
                            "which only vocab.from_checkpoint (--vocab-from) gives");
    });
    return s;
  }();
  return s;
}

}  // namespace parla

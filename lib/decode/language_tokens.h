#pragma once
// A multilingual model's language tokens, and the forced start of its outputs (M2M-100, NLLB-200; CTranslate2's
// target_prefix, transformers' forced_bos_token_id): the source language's token goes before the source's pieces,
// the target language's is forced first, then the pieces of decoding.target_prefix. The codes are the model's own
// (models::ModelMeta::languages: {"codes": {code: piece}, "source": code, "target": code}).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config/decoding_config.h"
#include "text/sentencepiece_vocab.h"

namespace parla::decode {

struct LanguageTokens {
  int source = -1;                     // source id placed before the pieces, or -1
  std::vector<int64_t> target_prefix;  // SearchOptions::target_prefix
};

// From the checkpoint's `languages` and decoding.source_lang / target_lang / target_prefix. ConfigError naming the
// key and listing the valid codes for a code the model lacks, or a language given to a model without languages.
LanguageTokens resolve_language_tokens(const nlohmann::json& languages, const DecodingConfig& cfg,
                                       const text::SentencePieceVocab& source, const text::SentencePieceVocab& target);

}  // namespace parla::decode

#pragma once
// A multilingual model's language codes and their tokens (M2M-100's "__de__", NLLB-200's "deu_Latn"): the
// checkpoint's `languages` ({"codes": {code: piece}, "source": code, "target": code}, models::ModelMeta) looked up
// in a vocabulary. Shared by the dataset (fine-tuning places the tokens) and the translator (decoding places them).
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "text/sentencepiece_vocab.h"

namespace parla::text {

// Every language code of the model and its token's id in `vocab` (empty for a model without languages).
std::map<std::string, int> language_ids(const nlohmann::json& languages, const SentencePieceVocab& vocab);

// The id of `asked`'s token in `vocab`; an empty `asked` takes `languages[default_key]`. -1 when the model has no
// languages and none is asked for. ConfigError naming `key` (e.g. "decoding.target_lang") for a code the model
// lacks (listing the valid ones), a language asked of a model without languages, or no code where one is needed;
// DataError when a code's token is not in `vocab` (a damaged checkpoint).
int language_token_id(const nlohmann::json& languages, const std::string& asked, const std::string& default_key,
                      const std::string& key, const SentencePieceVocab& vocab);

}  // namespace parla::text

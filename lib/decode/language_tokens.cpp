#include "decode/language_tokens.h"

#include "core/error.h"
#include "text/special_ids.h"

namespace parla::decode {

namespace {

std::string valid_codes(const nlohmann::json& codes) {
  std::string list;
  for (const auto& [code, piece] : codes.items()) list += (list.empty() ? "" : ", ") + code;
  return list;
}

// The table id of `code`'s token in `vocab`, or -1 when no code is asked for and the model has no default.
int language_id(const nlohmann::json& languages, const std::string& asked, const char* default_key, const char* key,
                const text::SentencePieceVocab& vocab) {
  const nlohmann::json codes = languages.value("codes", nlohmann::json::object());
  if (codes.empty()) {
    if (!asked.empty())
      throw ConfigError(std::string("key 'decoding.") + key + "' = '" + asked +
                        "': the model has no language codes (only multilingual models imported from M2M-100 or NLLB "
                        "have them; an OPUS-MT model takes '>>xx<<' at the start of the line)");
    return -1;
  }
  const std::string code = asked.empty() ? languages.value(default_key, std::string()) : asked;
  if (code.empty())
    throw ConfigError(std::string("key 'decoding.") + key + "': this model needs a language, one of: " + valid_codes(codes));
  if (!codes.contains(code) || !codes[code].is_string())
    throw ConfigError(std::string("key 'decoding.") + key + "' = '" + code + "' is not one of the model's languages: " +
                      valid_codes(codes));
  const int id = vocab.piece_to_id(codes[code].get<std::string>());
  if (id == kUnkId)
    throw DataError("the model's language '" + code + "' has no token in its vocabulary (a damaged checkpoint)");
  return id;
}

}  // namespace

std::map<std::string, int> language_ids(const nlohmann::json& languages, const text::SentencePieceVocab& vocab) {
  std::map<std::string, int> out;
  const nlohmann::json codes = languages.value("codes", nlohmann::json::object());  // kept: items() views it
  for (const auto& [code, piece] : codes.items())
    if (piece.is_string() && vocab.piece_to_id(piece.get<std::string>()) != kUnkId)
      out[code] = vocab.piece_to_id(piece.get<std::string>());
  return out;
}

LanguageTokens resolve_language_tokens(const nlohmann::json& languages, const DecodingConfig& cfg,
                                       const text::SentencePieceVocab& source, const text::SentencePieceVocab& target) {
  LanguageTokens out;
  out.source = language_id(languages, cfg.source_lang, "source", "source_lang", source);
  const int target_id = language_id(languages, cfg.target_lang, "target", "target_lang", target);
  if (target_id >= 0) out.target_prefix.push_back(target_id);
  if (!cfg.target_prefix.empty())
    for (int id : target.encode(cfg.target_prefix)) out.target_prefix.push_back(id);
  return out;
}

}  // namespace parla::decode

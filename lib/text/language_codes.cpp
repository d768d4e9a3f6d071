#include "text/language_codes.h"

#include "core/error.h"
#include "text/special_ids.h"

namespace parla::text {

namespace {

std::string valid_codes(const nlohmann::json& codes) {
  std::string list;
  for (const auto& [code, piece] : codes.items()) list += (list.empty() ? "" : ", ") + code;
  return list;
}

}  // namespace

std::map<std::string, int> language_ids(const nlohmann::json& languages, const SentencePieceVocab& vocab) {
  std::map<std::string, int> out;
  const nlohmann::json codes = languages.value("codes", nlohmann::json::object());  // kept: items() views it
  for (const auto& [code, piece] : codes.items())
    if (piece.is_string() && vocab.piece_to_id(piece.get<std::string>()) != kUnkId)
      out[code] = vocab.piece_to_id(piece.get<std::string>());
  return out;
}

int language_token_id(const nlohmann::json& languages, const std::string& asked, const std::string& default_key,
                      const std::string& key, const SentencePieceVocab& vocab) {
  const nlohmann::json codes = languages.value("codes", nlohmann::json::object());
  if (codes.empty()) {
    if (!asked.empty())
      throw ConfigError("key '" + key + "' = '" + asked +
                        "': the model has no language codes (only multilingual models imported from M2M-100 or NLLB "
                        "have them; an OPUS-MT model takes '>>xx<<' at the start of the line)");
    return -1;
  }
  const std::string code = asked.empty() ? languages.value(default_key, std::string()) : asked;
  if (code.empty()) throw ConfigError("key '" + key + "': this model needs a language, one of: " + valid_codes(codes));
  if (!codes.contains(code) || !codes[code].is_string())
    throw ConfigError("key '" + key + "' = '" + code + "' is not one of the model's languages: " + valid_codes(codes));
  const int id = vocab.piece_to_id(codes[code].get<std::string>());
  if (id == kUnkId)
    throw DataError("the model's language '" + code + "' has no token in its vocabulary (a damaged checkpoint)");
  return id;
}

}  // namespace parla::text

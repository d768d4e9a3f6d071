#include "decode/language_tokens.h"

#include "text/language_codes.h"

namespace parla::decode {

LanguageTokens resolve_language_tokens(const nlohmann::json& languages, const DecodingConfig& cfg,
                                       const text::SentencePieceVocab& source, const text::SentencePieceVocab& target) {
  LanguageTokens out;
  out.source = text::language_token_id(languages, cfg.source_lang, "source", "decoding.source_lang", source);
  const int target_id = text::language_token_id(languages, cfg.target_lang, "target", "decoding.target_lang", target);
  if (target_id >= 0) out.target_prefix.push_back(target_id);
  if (!cfg.target_prefix.empty())
    for (int id : target.encode(cfg.target_prefix)) out.target_prefix.push_back(id);
  return out;
}

}  // namespace parla::decode

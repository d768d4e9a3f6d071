#pragma once
// What translating needs from its checkpoints, loaded once (CTranslate2's models::Model and its replica set-up):
// the model (one checkpoint, or several as an ensemble) on its device, quantized to int8 or packed for fp32 as
// decoding.precision chose; both SentencePiece vocabularies; a multilingual model's language tokens; how much of a
// source line is kept; and the base search the `decoding` keys describe, with the loaded shortlist and the forced
// target prefix. parla-translate and parla-serve both start from this bundle, so a decoding key reaches both.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include "core/config/decoding_config.h"
#include "decode/search_options.h"
#include "models/seq2seq.h"
#include "text/sentencepiece_vocab.h"

namespace parla::decode {

struct TranslationModel {
  // The bundle of a model already in memory (`model` may be an Ensemble), moved to `device`. `precision`:
  // cfg.precision resolved for that device (runtime::resolve_precision). `languages`: a multilingual model's
  // (models::ModelMeta::languages), resolved with decoding.source_lang, target_lang and target_prefix.
  TranslationModel(std::shared_ptr<models::Seq2SeqModel> model, text::SentencePieceVocab source_vocab,
                   text::SentencePieceVocab target_vocab, const DecodingConfig& cfg, const c10::Device& device,
                   c10::ScalarType precision, const nlohmann::json& languages = nlohmann::json::object());

  std::shared_ptr<models::Seq2SeqModel> model;  // on `device`, in eval mode
  text::SentencePieceVocab source_vocab, target_vocab;
  // SearchOptions::from_config(decoding) with the shortlist (decoding.shortlist) and the target language's tokens
  // (decoding.target_lang, target_prefix): what a translation searches with unless a caller changes a field.
  SearchOptions options;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  // Float (fp32), BFloat16 or Half: the autocast dtype decoding.precision resolved to on `device`.
  c10::ScalarType precision = c10::ScalarType::Float;
  // The longest source (pieces, without EOS and the language token) kept: decoding.max_input_length and the
  // model's positions (1023 for a model without a limit, unless max_input_length says otherwise).
  int64_t max_input_length = 0;
  // The characters of a raw line kept before it is sanitised and tokenized (decoding.max_input_chars, or derived
  // from max_input_length).
  size_t max_input_chars = 0;
  // A multilingual model's language codes and their tokens' ids (decode/language_tokens.h), and the source
  // language token placed before each source (-1: none).
  std::map<std::string, int> language_ids;
  int source_language = -1;

  // Loads one checkpoint, or several as an ensemble (they must carry identical SentencePiece models and
  // vocabulary sizes), onto `device`. DataError naming the file for a missing, corrupt, non-parla or
  // incompatible checkpoint; ConfigError naming the key for a precision or shortlist the model cannot use.
  static std::shared_ptr<const TranslationModel> load(const std::vector<std::string>& checkpoints,
                                                      const DecodingConfig& cfg,
                                                      const c10::Device& device = c10::Device(c10::DeviceType::CPU));
};

}  // namespace parla::decode

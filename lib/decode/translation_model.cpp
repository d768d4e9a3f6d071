#include "decode/translation_model.h"

#include <algorithm>
#include <functional>
#include <future>
#include <limits>
#include <utility>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "decode/ensemble.h"
#include "decode/language_tokens.h"
#include "decode/lexical_shortlist.h"
#include "kernels/fp32_gemm.h"
#include "kernels/int8_gemm.h"
#include "models/checkpoint.h"
#include "models/packed_fp32.h"
#include "runtime/runtime_device.h"
#include "text/language_codes.h"

namespace parla::decode {
namespace {

// decoding.max_input_length = 0 on a model without a position limit (sinusoidal positions, an RNN): the limit of a
// model with model.max_positions' default 1024 positions (one is EOS's), so that no model decodes sources of
// unbounded length by default (a 50 MB line of words made 300,000 pieces and 23 GB, issue 35).
constexpr int64_t kDefaultMaxInputLength = 1023;
// decoding.max_input_chars = 0 derives the character budget from the piece limit: SentencePiece's pieces are at
// most 16 characters long (max_sentencepiece_length, which parla's vocabularies keep at its default), doubled for
// the blanks that collapse into one piece boundary and for normalisation that contracts (NFKC composing marks).
constexpr int64_t kCharsPerPiece = 32;

// The source needs one position for EOS.
int64_t source_limit(const models::Seq2SeqModel& model, const DecodingConfig& cfg) {
  const int64_t limit = model.max_positions();
  const bool unlimited = limit == std::numeric_limits<int64_t>::max();
  const int64_t own = unlimited ? kDefaultMaxInputLength : std::max<int64_t>(1, limit - 1);
  if (cfg.max_input_length <= 0) return own;
  return unlimited ? cfg.max_input_length : std::min<int64_t>(own, cfg.max_input_length);
}

std::shared_ptr<const LexicalShortlist> load_shortlist(const DecodingConfig& cfg, const TranslationModel& m) {
  auto shortlist =
      std::make_shared<const LexicalShortlist>(LexicalShortlist::load(cfg.shortlist, m.source_vocab, m.target_vocab));
  if (!m.model->supports_shortlist())
    throw ConfigError("decoding.shortlist: this model cannot restrict its output to a shortlist");
  size_t rules = 0;
  for (size_t n = 1; n <= shortlist->max_ngram(); ++n) rules += shortlist->rules(n).size();
  spdlog::info("shortlist {}: {} pieces always allowed, {} source rules", cfg.shortlist, shortlist->always().size(),
               rules);
  return shortlist;
}

// One checkpoint's model, int8 or packed as decoding.precision asks; `on_meta` sees its metadata before the weights.
std::shared_ptr<models::Seq2SeqModel> load_member(const std::string& path, const DecodingConfig& cfg,
                                                  const c10::Device& device,
                                                  const std::function<void(const models::ModelMeta&)>& on_meta,
                                                  models::ModelMeta& meta) {
  auto loaded = models::load_seq2seq(path, device, on_meta, /*int8=*/cfg.precision == Precision::kInt8);
  if (!loaded.meta.int8.empty() && cfg.precision != Precision::kInt8 && cfg.precision != Precision::kFp32)
    throw ConfigError("decoding.precision '" + std::string(config::name_of(cfg.precision)) + "': " + path +
                      " is an int8 checkpoint; it decodes with int8 (or fp32, which means the same for it)");
  const bool int8 = cfg.precision == Precision::kInt8 || !loaded.meta.int8.empty();
  // fp32 on the CPU: the weights packed for the decoder's products where they pay (models/packed_fp32.h).
  const bool packed = !int8 && cfg.precision == Precision::kFp32 && device.is_cpu() && models::pack_fp32(*loaded.model);
  spdlog::info("loaded {} ({} model{})", path,
               loaded.meta.config.value("model", nlohmann::json::object()).value("type", std::string("?")),
               int8     ? ", int8 on " + kernels::int8::activation_code().isa
               : packed ? ", fp32 packed for " + std::string(kernels::fp32::isa_name(kernels::fp32::best_isa()))
                        : std::string());
  meta = std::move(loaded.meta);
  return std::move(loaded.model);
}

}  // namespace

TranslationModel::TranslationModel(std::shared_ptr<models::Seq2SeqModel> model_, text::SentencePieceVocab source,
                                   text::SentencePieceVocab target, const DecodingConfig& cfg,
                                   const c10::Device& device_, c10::ScalarType precision_,
                                   const nlohmann::json& languages)
    : model(std::move(model_)),
      source_vocab(std::move(source)),
      target_vocab(std::move(target)),
      options(SearchOptions::from_config(cfg)),
      device(device_),
      precision(precision_) {
  if (model->vocab_size() != target_vocab.size())
    throw DataError("the model's target vocabulary has " + std::to_string(model->vocab_size()) +
                    " entries but its SentencePiece model has " + std::to_string(target_vocab.size()));
  model->to(device);
  model->eval();
  max_input_length = source_limit(*model, cfg);
  max_input_chars =
      static_cast<size_t>(cfg.max_input_chars > 0 ? cfg.max_input_chars : max_input_length * kCharsPerPiece);
  const auto tokens = resolve_language_tokens(languages, cfg, source_vocab, target_vocab);
  source_language = tokens.source;
  language_ids = text::language_ids(languages, source_vocab);
  options.target_prefix = tokens.target_prefix;
  if (source_language >= 0 && max_input_length > 1) --max_input_length;  // the language token's position
  if (!cfg.shortlist.empty()) options.shortlist = load_shortlist(cfg, *this);
}

std::shared_ptr<const TranslationModel> TranslationModel::load(const std::vector<std::string>& checkpoints,
                                                               const DecodingConfig& cfg, const c10::Device& device) {
  if (checkpoints.empty()) throw UsageError("no model given: pass a checkpoint with -m/--models");
  // Before loading: int8 on a GPU is refused without reading a file.
  const c10::ScalarType precision = runtime::resolve_precision(cfg.precision, device, "decoding.precision");
  std::vector<std::shared_ptr<models::Seq2SeqModel>> members;
  models::ModelMeta first;
  // The first checkpoint's SentencePiece models build on another thread while its weights load (a noticeable part
  // of start-up: docs/BENCHMARKS.md, "Figures behind the code's choices").
  std::future<std::pair<text::SentencePieceVocab, text::SentencePieceVocab>> vocabularies;
  for (size_t i = 0; i < checkpoints.size(); ++i) {
    const auto& path = checkpoints[i];
    models::ModelMeta meta;
    members.push_back(load_member(path, cfg, device, [&](const models::ModelMeta& m) {
      if (m.src_spm.empty() || m.tgt_spm.empty())
        throw DataError("checkpoint " + path + " carries no SentencePiece model, so it cannot translate raw text");
      if (i > 0) return;
      first = m;
      vocabularies = std::async(std::launch::async,
                                [&first, &checkpoints] { return models::vocabularies(first, checkpoints[0]); });
    }, meta));
    if (i > 0 && (meta.src_spm != first.src_spm || meta.tgt_spm != first.tgt_spm ||
                  meta.src_pieces != first.src_pieces || meta.tgt_pieces != first.tgt_pieces)) {
      throw DataError("checkpoint " + path + " uses different SentencePiece models than " + checkpoints[0] +
                      ": ensemble members must share their vocabularies");
    }
  }
  std::shared_ptr<models::Seq2SeqModel> model = members[0];
  if (members.size() > 1) {
    model = std::make_shared<Ensemble>(members);
    spdlog::info("ensemble of {} models (mean log-probabilities)", members.size());
  }
  auto [src, tgt] = vocabularies.get();
  try {
    return std::make_shared<const TranslationModel>(model, std::move(src), std::move(tgt), cfg, device, precision,
                                                    first.languages);
  } catch (const DataError& e) {
    throw DataError("checkpoint " + checkpoints[0] + ": " + e.what());
  }
}

}  // namespace parla::decode

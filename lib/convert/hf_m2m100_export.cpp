#include "convert/hf_m2m100_export.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "convert/hf_marian_layout.h"
#include "convert/hf_folder.h"
#include "convert/hf_folder_writer.h"
#include "core/config.h"
#include "core/error.h"
#include "models/tensor_archive.h"
#include "models/transformer.h"
#include "text/sentencepiece_model_check.h"
#include "text/unicode.h"

namespace parla::convert {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kHfBos = 0, kHfPad = 1, kHfEos = 2, kHfUnk = 3;  // fairseq's dictionary

std::string base64(const std::string& bytes) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = static_cast<unsigned char>(bytes[i]) << 16 | static_cast<unsigned char>(bytes[i + 1]) << 8 |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int s : {18, 12, 6, 0}) out += alphabet[(v >> s) & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = static_cast<unsigned char>(bytes[i]) << 16 | static_cast<unsigned char>(bytes[i + 1]) << 8;
    for (int s : {18, 12, 6}) out += alphabet[(v >> s) & 63];
    out += "=";
  }
  return out;
}

// The BPE merges of a SentencePiece BPE model, as transformers' converter derives them from the pieces alone
// (tokenization_utils_base.generate_merges without scores): every split of a piece into two pieces, by the merged
// piece's id, then the left part's length and the right part's (in characters), then the parts' ids. `pieces`: the
// BPE's vocabulary by id (NLLB's is the SentencePiece model's, shifted by one for fairseq's four specials, which
// keeps the order).
nlohmann::json bpe_merges(const std::vector<std::string>& pieces) {
  std::map<std::string, int> id;
  for (size_t i = 0; i < pieces.size(); ++i) id.emplace(pieces[i], static_cast<int>(i));
  struct Merge {
    int merged;
    size_t left_chars, right_chars;
    int left, right;
    std::string l, r;
  };
  std::vector<Merge> merges;
  for (int i = 0; i < static_cast<int>(pieces.size()); ++i) {
    const std::string& piece = pieces[static_cast<size_t>(i)];
    std::vector<size_t> chars;  // byte offsets of the characters, then the end
    for (size_t at = 0; at < piece.size(); at += text::utf8_length(static_cast<unsigned char>(piece[at])))
      chars.push_back(at);
    chars.push_back(piece.size());
    for (size_t k = 1; k + 1 < chars.size(); ++k) {
      const std::string l = piece.substr(0, chars[k]), r = piece.substr(chars[k]);
      const auto a = id.find(l), b = id.find(r);
      if (a != id.end() && b != id.end()) merges.push_back({i, k, chars.size() - 1 - k, a->second, b->second, l, r});
    }
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& x, const Merge& y) {
    return std::tie(x.merged, x.left_chars, x.right_chars, x.left, x.right) <
           std::tie(y.merged, y.left_chars, y.right_chars, y.left, y.right);
  });
  nlohmann::json out = nlohmann::json::array();
  for (const auto& m : merges) out.push_back({m.l, m.r});
  return out;
}

nlohmann::json added_token(int64_t id, const std::string& content, bool mask = false) {
  return {{"id", id},          {"content", content}, {"single_word", false}, {"lstrip", mask},
          {"rstrip", false},   {"normalized", mask}, {"special", true}};
}

// NLLB's tokenizer.json: transformers' NllbTokenizer over a BPE of the base pieces (`base`: HF id -> piece).
nlohmann::json nllb_tokenizer_json(const std::vector<std::string>& hf_pieces, int64_t base, const std::string& spm_proto,
                                   const std::vector<int64_t>& language_ids, int64_t mask_id,
                                   const std::string& source_token, int64_t source_id) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int64_t i = 0; i < base; ++i) vocab[hf_pieces[static_cast<size_t>(i)]] = i;
  nlohmann::json normalizers = nlohmann::json::array();
  const std::string charsmap = text::sentencepiece_precompiled_charsmap(spm_proto);
  if (!charsmap.empty()) normalizers.push_back({{"type", "Precompiled"}, {"precompiled_charsmap", base64(charsmap)}});
  normalizers.push_back({{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}});
  nlohmann::json added = nlohmann::json::array();
  for (int64_t id : {kHfBos, kHfPad, kHfEos, kHfUnk}) added.push_back(added_token(id, hf_pieces[static_cast<size_t>(id)]));
  for (int64_t id : language_ids) added.push_back(added_token(id, hf_pieces[static_cast<size_t>(id)]));
  if (mask_id >= 0) added.push_back(added_token(mask_id, "<mask>", true));
  const nlohmann::json metaspace = {{"type", "Metaspace"}, {"replacement", "\xe2\x96\x81"},
                                    {"prepend_scheme", "always"}, {"split", true}};
  auto special = [](const std::string& t) { return nlohmann::json{{"SpecialToken", {{"id", t}, {"type_id", 0}}}}; };
  auto sequence = [](const char* s) { return nlohmann::json{{"Sequence", {{"id", s}, {"type_id", 0}}}}; };
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", {{"type", "Sequence"}, {"normalizers", normalizers}}},
          {"pre_tokenizer", metaspace},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", {special(source_token), sequence("A"), special("</s>")}},
            {"pair", {special(source_token), sequence("A"), sequence("B"), special("</s>")}},
            {"special_tokens",
             {{"</s>", {{"id", "</s>"}, {"ids", {kHfEos}}, {"tokens", {"</s>"}}}},
              {source_token, {{"id", source_token}, {"ids", {source_id}}, {"tokens", {source_token}}}}}}}},
          {"decoder", metaspace},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", "<unk>"},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", true},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", bpe_merges(std::vector<std::string>(hf_pieces.begin(), hf_pieces.begin() + base))}}}};
}

std::string dump(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

bool is_m2m100_architecture(const models::ModelMeta& meta) {
  const auto model = meta.config.value("model", nlohmann::json::object());
  return model.value("sinusoidal_layout", std::string()) == "fairseq" &&
         model.value("decoder_start", std::string()) == "eos" &&
         !meta.languages.value("codes", nlohmann::json::object()).empty();
}

namespace {

// Throws DataError naming the checkpoint: `what` cannot be represented as an M2M-100 model.
[[noreturn]] void refuse_export(const std::string& checkpoint, const std::string& what) {
  throw DataError(checkpoint + ": " + what + ", which an M2M-100 model cannot represent; export it for "
                  "CTranslate2 instead (tools/export-ctranslate2.py)");
}

// The architecture M2M100ForConditionalGeneration has: a pre-norm Transformer with fairseq's sinusoids, one
// embedding table tied to the output without a bias, full self-attention, decoding from </s>.
models::TransformerModel& m2m100_transformer(const models::LoadedSeq2Seq& loaded, const ModelConfig& cfg,
                                             const std::string& checkpoint) {
  auto refuse = [&](const std::string& what) { refuse_export(checkpoint, what); };
  auto* model = dynamic_cast<models::TransformerModel*>(loaded.model.get());
  if (!model) refuse("model.type is '" + std::string(config::name_of(cfg.type)) + "'");
  if (cfg.norm != LayerNormPlacement::kPre) refuse("model.norm is '" + std::string(config::name_of(cfg.norm)) + "'");
  if (cfg.positions != PositionEncoding::kSinusoidal || cfg.sinusoidal_layout != SinusoidalLayout::kFairseq)
    refuse("the positions are not fairseq's sinusoids");
  if (!cfg.share_embeddings || !cfg.tie_output || cfg.output_bias)
    refuse("the embeddings are not one table shared by both sides and the output, without a bias");
  if (model->start_id() != parla::kEosId) refuse("the decoder does not start from </s>");
  for (const bool decoder : {false, true})
    if (cfg.self_attention(decoder) != AttentionKind::kFull)
      refuse("self-attention is '" + std::string(config::name_of(cfg.self_attention(decoder))) + "'");
  return *model;
}

// The vocabulary in Hugging Face's order: fairseq's (the import moved only <s>, <pad>, </s>, <unk>, to parla's
// 2, 0, 3, 1), the pieces first, then the control tokens (language codes, <mask>, spare rows), as the tokenizers
// number them.
struct HfVocabulary {
  std::vector<int64_t> hf_to_parla;
  std::vector<std::string> pieces;
  int64_t base = 0;  // pieces before the first control token
  std::vector<int64_t> language_ids, spare_ids;
  int64_t mask_id = -1;
  std::map<std::string, std::string> code_of;  // language token -> code
  bool m2m = false;  // M2M-100's codes name tokens ("de" is "__de__"); NLLB's codes are their tokens ("deu_Latn")
};

HfVocabulary hf_vocabulary(const models::ModelMeta& meta, const std::string& checkpoint) {
  auto refuse = [&](const std::string& what) { refuse_export(checkpoint, what); };
  const auto& pieces = meta.src_pieces;
  if (pieces.size() < 4 || pieces != meta.tgt_pieces || meta.src_spm != meta.tgt_spm || pieces[0] != "<pad>" ||
      pieces[1] != "<unk>" || pieces[2] != "<s>" || pieces[3] != "</s>")
    refuse("its vocabulary is not an imported M2M-100 or NLLB one (one table, <pad> <unk> <s> </s> first)");
  HfVocabulary v;
  v.hf_to_parla = {2, 0, 3, 1};
  for (int64_t i = 4; i < static_cast<int64_t>(pieces.size()); ++i) v.hf_to_parla.push_back(i);
  for (int64_t i : v.hf_to_parla) v.pieces.push_back(pieces[static_cast<size_t>(i)]);

  const std::set<std::string> controls(meta.control_pieces.begin(), meta.control_pieces.end());
  const int64_t n = static_cast<int64_t>(v.pieces.size());
  while (v.base < n && !controls.count(v.pieces[static_cast<size_t>(v.base)])) ++v.base;
  const auto codes = meta.languages.value("codes", nlohmann::json::object());
  for (const auto& [code, token] : codes.items()) v.code_of[token.get<std::string>()] = code;
  for (int64_t i = v.base; i < n; ++i) {
    const auto& piece = v.pieces[static_cast<size_t>(i)];
    if (!controls.count(piece))
      refuse("piece " + std::to_string(i) + " ('" + piece.substr(0, 40) + "') follows the language tokens");
    if (v.code_of.count(piece)) {
      if (!v.spare_ids.empty() || v.mask_id >= 0) refuse("a language token follows the spare rows");
      v.language_ids.push_back(i);
    } else if (piece == "<mask>") {
      v.mask_id = i;
    } else if (piece.rfind("<parla:unused:", 0) == 0) {
      v.spare_ids.push_back(i);
    } else {
      refuse("the control token '" + piece.substr(0, 40) + "' is neither a language nor <mask>");
    }
  }
  if (v.language_ids.empty()) refuse("none of its language codes' tokens is in its vocabulary");
  const std::string& first_token = v.pieces[static_cast<size_t>(v.language_ids.at(0))];
  v.m2m = v.code_of.at(first_token) != first_token;
  if (v.m2m && v.language_ids.size() != 100 && v.language_ids.size() != 7)
    refuse(std::to_string(v.language_ids.size()) + " language codes (M2M100Tokenizer knows lists of 100 and 7)");
  return v;
}

// model.safetensors: the shared table in Hugging Face's order, the layers and the final norms.
models::TensorArchive m2m100_weights(models::TransformerModel& model, const ModelConfig& cfg, const HfVocabulary& v) {
  models::TensorArchive st;
  st.write("format", std::string("pt"));
  auto params = model.named_parameters(true);
  const auto order = torch::tensor(v.hf_to_parla, torch::kLong);
  st.write("model.shared.weight", params["tgt_embed.weight"].detach().to(torch::kFloat).index_select(0, order).contiguous());
  write_hf_layers(st, params, cfg, torch::arange(cfg.d_model));
  for (const char* side : {"encoder", "decoder"})
    for (const char* p : {"weight", "bias"})
      st.write(std::string("model.") + side + ".layer_norm." + p,
               params[std::string(side) + ".final_norm." + p].detach().to(torch::kFloat).contiguous());
  return st;
}

nlohmann::json m2m100_config_json(const ModelConfig& cfg, const HfVocabulary& v) {
  nlohmann::json config = {{"architectures", {"M2M100ForConditionalGeneration"}},
                           {"model_type", "m2m_100"},
                           {"vocab_size", static_cast<int64_t>(v.pieces.size())},
                           {"tie_word_embeddings", true},
                           {"bos_token_id", kHfBos},
                           {"pad_token_id", kHfPad},
                           {"eos_token_id", kHfEos},
                           {"decoder_start_token_id", kHfEos}};
  config.update(bart_config_json(cfg, cfg.max_positions));
  return config;
}

// tokenizer_config.json: M2M100Tokenizer's (vocab.json + the language list by name) or NllbTokenizer's.
nlohmann::json tokenizer_config_json(const HfVocabulary& v, const std::string& source_code, const std::string& target) {
  nlohmann::json language_tokens = nlohmann::json::array();
  for (int64_t id : v.language_ids) language_tokens.push_back(v.pieces[static_cast<size_t>(id)]);
  nlohmann::json tokenizer = {{"bos_token", "<s>"}, {"eos_token", "</s>"},  {"pad_token", "<pad>"},
                              {"unk_token", "<unk>"}, {"sep_token", "</s>"}, {"extra_special_tokens", language_tokens},
                              {"src_lang", source_code}};
  if (!target.empty()) tokenizer["tgt_lang"] = target;
  if (v.m2m) {
    // M2M100Tokenizer numbers its language tokens after vocab.json, in the order of its list of codes
    // ("m2m100": 100, "wmt21": 7); added_tokens_decoder names them by id all the same.
    nlohmann::json decoder = nlohmann::json::object();
    for (int64_t id : {kHfBos, kHfPad, kHfEos, kHfUnk}) decoder[std::to_string(id)] = added_token(id, v.pieces[static_cast<size_t>(id)]);
    for (int64_t id : v.language_ids) decoder[std::to_string(id)] = added_token(id, v.pieces[static_cast<size_t>(id)]);
    for (auto& [id, t] : decoder.items()) t.erase("id");
    tokenizer["added_tokens_decoder"] = decoder;
    tokenizer["tokenizer_class"] = "M2M100Tokenizer";
    tokenizer["language_codes"] = v.language_ids.size() == 100 ? "m2m100" : "wmt21";
    tokenizer["num_madeup_words"] = v.spare_ids.size();
  } else {
    tokenizer["tokenizer_class"] = "NllbTokenizer";
    tokenizer["legacy_behaviour"] = false;
    tokenizer["cls_token"] = "<s>";
    if (v.mask_id >= 0) tokenizer["mask_token"] = "<mask>";
  }
  return tokenizer;
}

}  // namespace

void export_hf_m2m100(const std::string& checkpoint, const std::string& out) {
  if (fs::exists(out)) throw UsageError(out + ": exists; give a folder that does not exist yet");
  auto loaded = models::load_seq2seq(checkpoint);
  const auto& meta = loaded.meta;
  if (!meta.int8.empty())
    throw DataError(checkpoint + ": is an int8 checkpoint; export the float checkpoint it was quantized from");
  const ModelConfig cfg = models::model_config(meta, checkpoint);
  auto& model = m2m100_transformer(loaded, cfg, checkpoint);
  const HfVocabulary v = hf_vocabulary(meta, checkpoint);
  const auto codes = meta.languages.value("codes", nlohmann::json::object());
  const std::string source = meta.languages.value("source", std::string()),
                    target = meta.languages.value("target", std::string());
  const std::string source_code = source.empty() ? v.code_of.begin()->second : source;

  HfFolderWriter folder(out);
  m2m100_weights(model, cfg, v).save(folder.file("model.safetensors"));
  folder.text("config.json", dump(m2m100_config_json(cfg, v)));
  folder.text("generation_config.json", dump({{"bos_token_id", kHfBos}, {"decoder_start_token_id", kHfEos},
                                              {"eos_token_id", kHfEos}, {"pad_token_id", kHfPad}}));
  folder.text("tokenizer_config.json", dump(tokenizer_config_json(v, source_code, target)));
  folder.text("sentencepiece.bpe.model", meta.src_spm);
  if (v.m2m) {
    nlohmann::json vocab_json = nlohmann::json::object();
    for (int64_t i = 0; i < v.base; ++i) vocab_json[v.pieces[static_cast<size_t>(i)]] = i;
    folder.text("vocab.json", dump(vocab_json));
  } else {
    const std::string source_token = codes[source_code].get<std::string>();
    const int64_t source_id = std::find(v.pieces.begin(), v.pieces.end(), source_token) - v.pieces.begin();
    folder.text("tokenizer.json", dump(nllb_tokenizer_json(v.pieces, v.base, meta.src_spm, v.language_ids, v.mask_id,
                                                          source_token, source_id)));
  }
  folder.commit();
}

}  // namespace parla::convert

#include "convert/hf_m2m100_import.h"

#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include <torch/torch.h>

#include "convert/hf_folder.h"
#include "core/error.h"
#include "formats/bounded_file.h"
#include "formats/json_file.h"
#include "nn/positional_encoding.h"
#include "text/sentencepiece_model_check.h"

namespace parla::convert {

namespace fs = std::filesystem;
using formats::JsonFields;
using formats::read_json_file;

namespace {

// id -> piece of the whole vocabulary (`size` ids): the base vocabulary, then the added tokens, each id once.
class VocabularyTable {
 public:
  explicit VocabularyTable(int64_t size) : pieces_(static_cast<size_t>(size)) {}

  void set(int64_t id, const std::string& piece, const std::string& source, bool control) {
    if (id < 0 || id >= static_cast<int64_t>(pieces_.size()))
      throw DataError(source + ": token '" + piece.substr(0, 60) + "' has id " + std::to_string(id) +
                      ", outside the model's vocabulary of " + std::to_string(pieces_.size()) + " (config.json vocab_size)");
    auto& slot = pieces_[static_cast<size_t>(id)];
    if (!slot.empty() && slot != piece)
      throw DataError(source + ": id " + std::to_string(id) + " is '" + piece.substr(0, 60) + "', but another file of "
                      "the folder numbers '" + slot.substr(0, 60) + "' so");
    slot = piece;
    if (control) controls_.insert(piece);
  }
  bool has(int64_t id) const { return !pieces_[static_cast<size_t>(id)].empty(); }

  // Ids no file names (M2M-100's spare rows) become placeholders that never occur in text.
  std::vector<std::string> finish() {
    for (size_t id = 0; id < pieces_.size(); ++id)
      if (pieces_[id].empty()) {
        pieces_[id] = "<parla:unused:" + std::to_string(id) + ">";
        controls_.insert(pieces_[id]);
        ++unnamed_;
      }
    return pieces_;
  }
  size_t unnamed() const { return unnamed_; }
  const std::set<std::string>& controls() const { return controls_; }

 private:
  std::vector<std::string> pieces_;
  std::set<std::string> controls_;
  size_t unnamed_ = 0;
};

bool is_plain_special(const std::string& piece) {
  return piece == "<s>" || piece == "<pad>" || piece == "</s>" || piece == "<unk>";
}

// The language a code token stands for, as the tokenizer's src_lang/tgt_lang name it: "__de__" -> "de"
// (M2M-100), "deu_Latn" as it is (NLLB); "" for a token that is no language code.
std::string language_of(const std::string& token) {
  if (token.size() > 4 && token.compare(0, 2, "__") == 0 && token.compare(token.size() - 2, 2, "__") == 0)
    return token.substr(2, token.size() - 4);
  const size_t u = token.find('_');
  if (u == 3 && token.size() == 8) return token;  // ISO 639-3 + "_" + ISO 15924 script
  return "";
}

// The whole vocabulary of `dir` into `table`: the base (M2M-100's vocab.json, or NLLB's tokenizer.json), then the
// added tokens of tokenizer.json, tokenizer_config.json (`tok_config`) and added_tokens.json.
void read_vocabulary(const std::string& dir, const nlohmann::json& tok_config, VocabularyTable& table) {
  const fs::path vocab_json = fs::path(dir) / "vocab.json", tokenizer_json = fs::path(dir) / "tokenizer.json",
                 tokenizer_config = fs::path(dir) / "tokenizer_config.json", added_json = fs::path(dir) / "added_tokens.json";
  if (fs::exists(vocab_json)) {
    const auto base = read_hf_vocab(vocab_json.string());
    for (size_t id = 0; id < base.size(); ++id) table.set(static_cast<int64_t>(id), base[id], vocab_json.string(), false);
  }
  if (fs::exists(tokenizer_json)) {
    // NLLB's is 17 MB; tokenizers writes its BPE vocab as {piece: id} and its added tokens with their ids.
    const auto t = read_json_file(tokenizer_json.string(), 64u << 20);
    const std::string where = tokenizer_json.string();
    try {
      if (!fs::exists(vocab_json) && t.contains("model") && t["model"].contains("vocab") && t["model"]["vocab"].is_object())
        for (const auto& [piece, id] : t["model"]["vocab"].items()) table.set(id.get<int64_t>(), piece, where, false);
      if (t.contains("added_tokens"))
        for (const auto& a : t.at("added_tokens")) {
          const std::string piece = a.at("content").get<std::string>();
          table.set(a.at("id").get<int64_t>(), piece, where, a.value("special", false) && !is_plain_special(piece));
        }
    } catch (const nlohmann::json::exception& e) {
      throw DataError(where + ": not a tokenizers file parla understands (" + std::string(e.what()).substr(0, 200) + ")");
    }
  }
  try {
    if (tok_config.contains("added_tokens_decoder"))
      for (const auto& [id, a] : tok_config["added_tokens_decoder"].items()) {
        const std::string piece = a.at("content").get<std::string>();
        table.set(std::stoll(id), piece, tokenizer_config.string(), a.value("special", false) && !is_plain_special(piece));
      }
  } catch (const std::exception& e) {
    throw DataError(tokenizer_config.string() + ": added_tokens_decoder is malformed (" + std::string(e.what()).substr(0, 200) + ")");
  }
  if (fs::exists(added_json)) {
    const auto a = read_json_file(added_json.string(), 16u << 20);
    if (!a.is_object()) throw DataError(added_json.string() + ": not a JSON object of token -> id");
    for (const auto& [piece, id] : a.items()) {
      if (!id.is_number_integer()) throw DataError(added_json.string() + ": the id of '" + piece.substr(0, 60) + "' is not an integer");
      table.set(id.get<int64_t>(), piece, added_json.string(), !is_plain_special(piece));
    }
  }
}

// The model's languages (models::ModelMeta::languages): the tokenizer's list of codes (transformers 5 writes
// extra_special_tokens, 4 additional_special_tokens), or every control token shaped like a code, and its default
// src_lang / tgt_lang.
nlohmann::json languages_of(const nlohmann::json& tok_config, const VocabularyTable& table) {
  nlohmann::json codes = nlohmann::json::object();
  for (const char* key : {"extra_special_tokens", "additional_special_tokens"})
    if (tok_config.contains(key) && tok_config[key].is_array())
      for (const auto& token : tok_config[key])
        if (token.is_string() && table.controls().count(token.get<std::string>()) &&
            !language_of(token.get<std::string>()).empty())
          codes[language_of(token.get<std::string>())] = token.get<std::string>();
  if (codes.empty())  // a folder without that list: every control token shaped like a code
    for (const auto& piece : table.controls())
      if (!language_of(piece).empty()) codes[language_of(piece)] = piece;
  nlohmann::json languages = {{"codes", codes}};
  for (const char* key : {"src_lang", "tgt_lang"})
    if (tok_config.contains(key) && tok_config[key].is_string() && codes.contains(tok_config[key].get<std::string>()))
      languages[std::string(key) == "src_lang" ? "source" : "target"] = tok_config[key];
  return languages;
}

}  // namespace

ImportedModel read_hf_m2m100(const std::string& dir) {
  const std::string config_path = (fs::path(dir) / "config.json").string();
  const JsonFields c(config_path, read_json_file(config_path, 1u << 20));
  const std::string type = c.string("model_type");
  if (type != "m2m_100")
    throw DataError(config_path + ": model_type '" + type + "' is not 'm2m_100' (M2M-100 and NLLB models)");
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  ImportedModel m;
  m.model = read_bart_config(c, config_path, "relu");  // M2M100Config's default
  ModelConfig& cfg = m.model;
  const int64_t d = cfg.d_model;
  if (d < 4)  // fairseq's frequencies divide by d/2 - 1
    throw DataError(config_path + ": d_model " + std::to_string(d) + " is below 4, which fairseq's positions need");
  // fairseq's positions count from padding_idx + 1, which transformers fixes at 2: pad must be 1.
  const int64_t vocab = c.integer("vocab_size", 5, kIntMax);
  const int64_t pad = c.integer("pad_token_id"), eos = c.integer("eos_token_id");
  if (pad != 1)
    throw DataError(config_path + ": pad_token_id " + std::to_string(pad) + " is not 1, fairseq's, which M2M-100's "
                    "positions are counted from");
  const int64_t start = c.has("decoder_start_token_id") ? c.integer("decoder_start_token_id") : eos;
  if (start != eos)
    throw DataError(config_path + ": decoder_start_token_id " + std::to_string(start) + " is not eos_token_id " +
                    std::to_string(eos) + "; M2M-100 and NLLB decode from </s>");

  cfg.norm = LayerNormPlacement::kPre;
  cfg.sinusoidal_layout = SinusoidalLayout::kFairseq;
  cfg.output_bias = false;
  cfg.share_embeddings = true;
  cfg.decoder_start = DecoderStart::kEos;

  // The weights' file first: config.json's vocab_size must be the embedding table's rows, which the file holds,
  // before a table of that many entries is made.
  HfWeights w(dir, "AutoModelForSeq2SeqLM");
  const std::string embed = w.has("model.shared.weight") ? "model.shared.weight" : "model.encoder.embed_tokens.weight";
  if (w.shape(embed) != std::vector<int64_t>{vocab, d})
    throw DataError(w.path() + ": tensor '" + embed + "' has shape " + c10::str(c10::IntArrayRef(w.shape(embed))) +
                    ", config.json says [" + std::to_string(vocab) + ", " + std::to_string(d) + "]");

  // The vocabulary: the base, then the added tokens.
  const fs::path tokenizer_config = fs::path(dir) / "tokenizer_config.json";
  nlohmann::json tok_config = nlohmann::json::object();
  if (fs::exists(tokenizer_config)) tok_config = read_json_file(tokenizer_config.string(), 16u << 20);
  VocabularyTable table(vocab);
  read_vocabulary(dir, tok_config, table);
  for (int64_t id : {int64_t{0}, pad, eos})
    if (!table.has(id))
      throw DataError(dir + ": no file of the folder names token " + std::to_string(id) +
                      " (vocab.json or tokenizer.json, with tokenizer_config.json)");
  const auto pieces = table.finish();
  // A few spare rows are normal (M2M-100 has 8); a vocab_size far beyond what the files name is not a model.
  constexpr size_t kMaxUnnamed = 1024;
  if (table.unnamed() > kMaxUnnamed)
    throw DataError(config_path + ": vocab_size " + std::to_string(vocab) + ", but the tokenizer files name only " +
                    std::to_string(pieces.size() - table.unnamed()) + " tokens");
  const int64_t unk = hf_piece_id(pieces, "<unk>", dir), bos = hf_piece_id(pieces, "<s>", dir);
  if (pieces[static_cast<size_t>(eos)] != "</s>" || pieces[static_cast<size_t>(pad)] != "<pad>")
    throw DataError(config_path + ": eos_token_id and pad_token_id are not the vocabulary's </s> and <pad>");
  const auto order = parla_order(vocab, pad, unk, eos, dir, bos);
  for (int64_t id : order) m.src_pieces.push_back(pieces[static_cast<size_t>(id)]);
  m.tgt_pieces = m.src_pieces;
  m.control_pieces.assign(table.controls().begin(), table.controls().end());

  m.languages = languages_of(tok_config, table);

  const fs::path spm = fs::path(dir) / "sentencepiece.bpe.model";
  m.src_spm = formats::read_bounded_file(spm.string(), 64u << 20);
  text::check_sentencepiece_model(m.src_spm, spm.string());
  m.tgt_spm = m.src_spm;

  // Weights.
  auto permuted = [&](const torch::Tensor& t) { return t.index_select(0, torch::tensor(order, torch::kLong)); };
  auto table_weights = w.get(embed, {vocab, d});
  m.weights["tgt_embed.weight"] = permuted(table_weights);
  for (const char* alias : {"model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"})
    if (alias != embed && w.has(alias)) {  // a copy stored beside the table must be the table
      if (!w.get(alias, {vocab, d}).equal(table_weights))
        throw DataError(w.path() + ": " + alias + " differs from " + embed + "; M2M-100 shares one embedding table");
    }
  if (!cfg.tie_output) {
    m.weights["output_weight"] = permuted(w.get("lm_head.weight", {vocab, d}));
  } else if (w.has("lm_head.weight") && !w.get("lm_head.weight", {vocab, d}).equal(table_weights)) {
    throw DataError(w.path() + ": lm_head.weight differs from the embeddings, but config.json ties them");
  }
  // Older saves carry the sinusoid tables (or fairseq's _float_tensor): they must be fairseq's, which parla computes.
  for (const char* side : {"encoder", "decoder"}) {
    const std::string name = std::string("model.") + side + ".embed_positions.weights";
    if (w.has(name)) {
      auto t = w.get(name, {cfg.max_positions + 2, d});
      auto expected = nn::sinusoidal_table(cfg.max_positions, d, 0, SinusoidalLayout::kFairseq);
      if ((t.narrow(0, 2, cfg.max_positions) - expected).abs().max().item<double>() > 1e-4)
        throw DataError(w.path() + ": " + name + " is not fairseq's table of sinusoids");
    }
    const std::string fairseq_marker = std::string("model.") + side + ".embed_positions._float_tensor";
    if (w.has(fairseq_marker)) w.ignore(fairseq_marker);
  }
  // The layers have MarianMT's weights under the same names; pre-norm reads them in another order.
  read_hf_layers(w, m);
  for (const char* side : {"encoder", "decoder"}) {
    const std::string final_norm = std::string(side) + ".final_norm";
    m.weights[final_norm + ".weight"] = w.get(std::string("model.") + side + ".layer_norm.weight", {d});
    m.weights[final_norm + ".bias"] = w.get(std::string("model.") + side + ".layer_norm.bias", {d});
  }
  w.check_all_used("M2M-100 model");
  m.info = {{"imported_from", dir}, {"format", "huggingface-m2m_100"}};
  return m;
}

}  // namespace parla::convert

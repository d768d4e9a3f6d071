#include "convert/hf_marian_import.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include <torch/torch.h>

#include "convert/hf_marian_layout.h"
#include "convert/marian_import.h"
#include "core/bounded_json.h"
#include "core/error.h"
#include "formats/bounded_file.h"
#include "formats/json_file.h"
#include "formats/mapped_file.h"
#include "formats/torchscript_archive.h"
#include "models/tensor_archive.h"
#include "nn/positional_encoding.h"
#include "text/sentencepiece_model_check.h"

namespace parla::convert {

namespace {

namespace fs = std::filesystem;
using formats::JsonFields;
using formats::read_json_file;

// vocab.json: piece -> id, which must number 0 .. n-1 once each. Returns the piece of each id. Read member by
// member (core/bounded_json.h): a JSON tree of a 256 MB vocab.json would take several times the file.
std::vector<std::string> read_vocab(const std::string& path) {
  std::vector<std::string> pieces;
  std::vector<int64_t> ids;
  {
    const std::string text = formats::read_bounded_file(path, 256u << 20);
    parse_bounded_json_members(text, JsonLimits{}, path, [&](const std::string& piece, nlohmann::json& id) {
      if (!id.is_number_integer())
        throw DataError(path + ": the id of piece '" + piece.substr(0, 60) + "' is not an integer");
      if (id.is_number_unsigned() && id.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        throw DataError(path + ": the id of piece '" + piece.substr(0, 60) + "' is out of range");
      pieces.push_back(piece);
      ids.push_back(id.get<int64_t>());
    });
  }
  pieces = pieces_by_id(std::move(pieces), std::move(ids), path);
  // A piece given twice (JSON's last-one-wins would have dropped one of its ids): adjacent once sorted.
  std::vector<const std::string*> sorted;
  sorted.reserve(pieces.size());
  for (const auto& p : pieces) sorted.push_back(&p);
  std::sort(sorted.begin(), sorted.end(), [](const std::string* a, const std::string* b) { return *a < *b; });
  for (size_t i = 1; i < sorted.size(); ++i)
    if (*sorted[i] == *sorted[i - 1])
      throw DataError(path + ": piece '" + sorted[i]->substr(0, 60) + "' is given twice");
  return pieces;
}

int64_t id_of(const std::vector<std::string>& pieces, const std::string& piece, const std::string& path) {
  for (size_t i = 0; i < pieces.size(); ++i)
    if (pieces[i] == piece) return static_cast<int64_t>(i);
  throw DataError(path + ": has no '" + piece + "' piece");
}

class Weights {
 public:
  Weights(const std::string& path) : path_(path), archive_(models::TensorArchive::load(path)) {}

  bool has(const std::string& name) const { return archive_.contains(name); }
  // A float copy of tensor `name` with the given shape. DataError naming the file otherwise.
  torch::Tensor get(const std::string& name, std::vector<int64_t> shape) {
    torch::Tensor t;
    if (!archive_.try_read(name, t)) throw DataError(path_ + ": has no tensor '" + name + "'");
    if (!t.is_floating_point()) throw DataError(path_ + ": tensor '" + name + "' is not floating point");
    if (t.sizes().vec() != shape)
      throw DataError(path_ + ": tensor '" + name + "' has shape " + c10::str(t.sizes()) + ", config.json says " +
                      c10::str(c10::IntArrayRef(shape)));
    used_.insert(name);
    return t.to(torch::kFloat).clone();
  }
  void ignore(const std::string& name) { used_.insert(name); }
  // Every tensor of the file was used: anything left is something parla would silently drop.
  void check_all_used() const {
    for (const auto& name : archive_.tensor_names())
      if (!used_.count(name))
        throw DataError(path_ + ": tensor '" + name + "' has no place in a Marian model parla can represent");
  }

 private:
  std::string path_;
  models::TensorArchive archive_;
  std::set<std::string> used_;
};

}  // namespace

ImportedModel read_hf_marian(const std::string& dir) {
  const std::string config_path = (fs::path(dir) / "config.json").string();
  const JsonFields c(config_path, read_json_file(config_path, 1u << 20));
  const std::string type = c.string("model_type");
  if (type != "marian")
    throw DataError(config_path + ": model_type '" + type + "' is not 'marian' (parla imports MarianMT models)");
  for (const char* key : {"normalize_before", "normalize_embedding", "add_final_layer_norm"})
    if (c.has(key) && c.boolean(key))
      throw DataError(config_path + ": " + key + " = true is not Marian's layout (post-norm, no embedding norm), "
                      "which parla imports");
  // Every count parla keeps as an int is checked in range before it is narrowed.
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  const int64_t d = c.integer("d_model", 1, kIntMax), heads = c.integer("encoder_attention_heads", 1, kIntMax);
  if (c.integer("decoder_attention_heads") != heads)
    throw DataError(config_path + ": encoder_attention_heads and decoder_attention_heads differ; parla has one "
                    "model.heads");
  const int64_t ffn = c.integer("encoder_ffn_dim", 1, kIntMax);
  if (c.integer("decoder_ffn_dim") != ffn)
    throw DataError(config_path + ": encoder_ffn_dim and decoder_ffn_dim differ; parla has one model.ffn_dim");
  std::string act = c.string("activation_function");
  if (act == "silu") act = "swish";
  if (act != "swish" && act != "relu" && act != "gelu")
    throw DataError(config_path + ": activation_function '" + act + "' is not one parla has (swish, relu, gelu)");

  ImportedModel m;
  ModelConfig& cfg = m.model;
  cfg.type = ModelType::kTransformer;
  cfg.d_model = static_cast<int>(d);
  cfg.heads = static_cast<int>(heads);
  cfg.ffn_dim = static_cast<int>(ffn);
  cfg.encoder_layers = static_cast<int>(c.integer("encoder_layers", 1, kIntMax));
  cfg.decoder_layers = static_cast<int>(c.integer("decoder_layers", 1, kIntMax));
  config::parse_choice(act, cfg.activation);  // checked above
  cfg.norm = LayerNormPlacement::kPost;
  cfg.positions = PositionEncoding::kSinusoidal;
  cfg.sinusoidal_layout = SinusoidalLayout::kConcatenated;
  cfg.scale_embeddings = c.has("scale_embedding") && c.boolean("scale_embedding");
  cfg.output_bias = true;
  cfg.max_positions = static_cast<int>(c.integer("max_position_embeddings", 1, kIntMax));
  cfg.dropout = c.has("dropout") ? c.number("dropout") : 0.1;
  cfg.attention_dropout = c.has("attention_dropout") ? c.number("attention_dropout") : 0.0;
  cfg.activation_dropout = c.has("activation_dropout") ? c.number("activation_dropout") : 0.0;
  const bool shared = !c.has("share_encoder_decoder_embeddings") || c.boolean("share_encoder_decoder_embeddings");
  cfg.share_embeddings = shared;
  cfg.tie_output = !c.has("tie_word_embeddings") || c.boolean("tie_word_embeddings");

  // Vocabularies: vocab.json, and target_vocab.json when the two sides have their own.
  const std::string vocab_path = (fs::path(dir) / "vocab.json").string();
  const std::string target_vocab_path = (fs::path(dir) / "target_vocab.json").string();
  const auto src_vocab = read_vocab(vocab_path);
  const bool separate = !shared && fs::exists(target_vocab_path);
  const auto tgt_vocab = separate ? read_vocab(target_vocab_path) : src_vocab;
  const std::string& tgt_vocab_path = separate ? target_vocab_path : vocab_path;
  const int64_t vs = static_cast<int64_t>(src_vocab.size()), vt = static_cast<int64_t>(tgt_vocab.size());
  if (c.integer("vocab_size") != vs)
    throw DataError(config_path + ": vocab_size " + std::to_string(c.integer("vocab_size")) + ", but " + vocab_path +
                    " has " + std::to_string(vs) + " pieces");
  if (c.has("decoder_vocab_size") && c.integer("decoder_vocab_size") != vt)
    throw DataError(config_path + ": decoder_vocab_size " + std::to_string(c.integer("decoder_vocab_size")) + ", but " +
                    tgt_vocab_path + " has " + std::to_string(vt) + " pieces");
  const int64_t pad_s = id_of(src_vocab, "<pad>", vocab_path), unk_s = id_of(src_vocab, "<unk>", vocab_path),
                eos_s = id_of(src_vocab, "</s>", vocab_path);
  const int64_t pad_t = id_of(tgt_vocab, "<pad>", tgt_vocab_path), unk_t = id_of(tgt_vocab, "<unk>", tgt_vocab_path),
                eos_t = id_of(tgt_vocab, "</s>", tgt_vocab_path);
  if (c.integer("pad_token_id") != pad_s)
    throw DataError(config_path + ": pad_token_id " + std::to_string(c.integer("pad_token_id")) + " is not the id of '<pad>' in " +
                    vocab_path + " (" + std::to_string(pad_s) + ")");
  if (c.integer("eos_token_id") != eos_t)
    throw DataError(config_path + ": eos_token_id " + std::to_string(c.integer("eos_token_id")) + " is not the id of '</s>' in " +
                    tgt_vocab_path + " (" + std::to_string(eos_t) + ")");
  // Decoding starts from pad (OPUS-MT), or from <s> (a folder parla exported from one of its own models).
  const int64_t start = c.has("decoder_start_token_id") ? c.integer("decoder_start_token_id") : pad_t;
  const bool bos_start = start != pad_t;
  if (bos_start && (start < 0 || start >= vt || tgt_vocab[static_cast<size_t>(start)] != "<s>"))
    throw DataError(config_path + ": decoder_start_token_id " + std::to_string(start) +
                    " is neither the target's <pad> nor its <s>; parla's model.decoder_start is bos or pad");
  cfg.decoder_start = bos_start ? DecoderStart::kBos : DecoderStart::kPad;
  auto bos_of = [&](const std::vector<std::string>& v, const std::string& path) {
    return bos_start ? id_of(v, "<s>", path) : int64_t{-1};
  };
  const auto order_s = parla_order(vs, pad_s, unk_s, eos_s, vocab_path, bos_of(src_vocab, vocab_path));
  const auto order_t = parla_order(vt, pad_t, unk_t, eos_t, tgt_vocab_path, bos_of(tgt_vocab, tgt_vocab_path));
  for (int64_t id : order_s) m.src_pieces.push_back(src_vocab[static_cast<size_t>(id)]);
  for (int64_t id : order_t) m.tgt_pieces.push_back(tgt_vocab[static_cast<size_t>(id)]);
  m.src_spm = formats::read_bounded_file((fs::path(dir) / "source.spm").string(), 64u << 20);
  m.tgt_spm = formats::read_bounded_file((fs::path(dir) / "target.spm").string(), 64u << 20);
  text::check_sentencepiece_model(m.src_spm, (fs::path(dir) / "source.spm").string());
  text::check_sentencepiece_model(m.tgt_spm, (fs::path(dir) / "target.spm").string());

  // Weights: model.safetensors, else pytorch_model.bin in torch.save's zip format (torch >= 1.6), read as data by
  // the strict reader of parla's old checkpoints (formats/torchscript_archive.h), which runs nothing of its pickle.
  std::string st = (fs::path(dir) / "model.safetensors").string();
  if (!fs::exists(st)) {
    const std::string bin = (fs::path(dir) / "pytorch_model.bin").string();
    if (!fs::exists(bin)) throw DataError(st + ": missing (the weights of a MarianMT folder)");
    const auto mapped = formats::MappedFile::open(bin);  // a regular file, or DataError naming it
    if (!formats::looks_like_zip(mapped->data(), mapped->size()))
      throw DataError(bin + ": is in torch.save's legacy format (a bare pickle, torch < 1.6), which parla does not "
                      "read; re-save the folder as safetensors: python -c \"from transformers import MarianMTModel; "
                      "MarianMTModel.from_pretrained('" + dir + "').save_pretrained('" + dir +
                      "', safe_serialization=True)\"");
    st = bin;
  }
  Weights w(st);
  auto permuted = [](const torch::Tensor& t, const std::vector<int64_t>& order) {
    return t.index_select(0, torch::tensor(order, torch::kLong));
  };
  const std::string enc_embed = w.has("model.encoder.embed_tokens.weight") ? "model.encoder.embed_tokens.weight" : "model.shared.weight";
  const std::string dec_embed = w.has("model.decoder.embed_tokens.weight") ? "model.decoder.embed_tokens.weight" : "model.shared.weight";
  auto tgt_table = w.get(dec_embed, {vt, d});
  m.weights["tgt_embed.weight"] = permuted(tgt_table, order_t);
  if (!shared) m.weights["src_embed.weight"] = permuted(w.get(enc_embed, {vs, d}), order_s);
  for (const char* alias : {"model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"})
    if (w.has(alias)) w.ignore(alias);  // copies of the tables read above (tied)
  if (!cfg.tie_output) {
    m.weights["output_weight"] = permuted(w.get("lm_head.weight", {vt, d}), order_t);
  } else if (w.has("lm_head.weight")) {
    if (!w.get("lm_head.weight", {vt, d}).equal(tgt_table))
      throw DataError(st + ": lm_head.weight differs from the decoder's embeddings, but config.json ties them");
  }
  m.weights["output_bias"] = permuted(w.get("final_logits_bias", {1, vt}).view({vt}), order_t);
  // Older saves carry the sinusoid tables; they must be Marian's, which parla computes itself.
  for (const char* side : {"encoder", "decoder"}) {
    const std::string name = std::string("model.") + side + ".embed_positions.weight";
    if (!w.has(name)) continue;
    auto table = w.get(name, {cfg.max_positions, d});
    auto expected = nn::sinusoidal_table(cfg.max_positions, d, 0, SinusoidalLayout::kConcatenated);
    if ((table - expected).abs().max().item<double>() > 1e-4)
      throw DataError(st + ": " + name + " is not the table of concatenated sinusoids that MarianMT computes");
  }
  auto linear = [&](const std::string& from, const std::string& to, int64_t out, int64_t in) {
    m.weights[to + ".weight"] = w.get(from + ".weight", {out, in});
    m.weights[to + ".bias"] = w.get(from + ".bias", {out});
  };
  auto norm = [&](const std::string& from, const std::string& to) {
    m.weights[to + ".weight"] = w.get(from + ".weight", {d});
    m.weights[to + ".bias"] = w.get(from + ".bias", {d});
  };
  // q, k and v projections of one attention, stacked in parla's order (rows Q; K; V).
  auto stacked = [&](const std::string& from, const std::vector<std::string>& parts, const std::string& to) {
    std::vector<torch::Tensor> ws, bs;
    for (const auto& p : parts) {
      ws.push_back(w.get(from + "." + p + "_proj.weight", {d, d}));
      bs.push_back(w.get(from + "." + p + "_proj.bias", {d}));
    }
    m.weights[to + ".weight"] = torch::cat(ws, 0);
    m.weights[to + ".bias"] = torch::cat(bs, 0);
  };
  for (const bool decoder : {false, true}) {
    const std::string side = decoder ? "decoder" : "encoder";
    for (int l = 0; l < (decoder ? cfg.decoder_layers : cfg.encoder_layers); ++l) {
      const std::string from = "model." + side + ".layers." + std::to_string(l) + ".",
                        to = side + ".layers." + std::to_string(l) + ".";
      for (const auto& x : hf_marian_layer(decoder)) {
        const int64_t wide = x.inner ? ffn : d;
        switch (x.kind) {
          case LayerWeight::kStacked: stacked(from + x.hf, x.parts, to + x.parla); break;
          case LayerWeight::kReadsResidual: linear(from + x.hf, to + x.parla, wide, d); break;
          case LayerWeight::kWritesResidual: linear(from + x.hf, to + x.parla, d, wide); break;
          case LayerWeight::kNorm: norm(from + x.hf, to + x.parla); break;
        }
      }
    }
  }
  w.check_all_used();
  m.info = {{"imported_from", dir}, {"format", "huggingface-marian"}};
  return m;
}

}  // namespace parla::convert

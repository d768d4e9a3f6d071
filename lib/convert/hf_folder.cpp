#include "convert/hf_folder.h"

#include <algorithm>
#include <filesystem>
#include <limits>

#include <torch/torch.h>

#include "convert/hf_marian_layout.h"
#include "convert/marian_import.h"  // pieces_by_id
#include "core/bounded_json.h"
#include "core/config/schema.h"
#include "core/error.h"
#include "formats/bounded_file.h"
#include "formats/mapped_file.h"
#include "formats/torchscript_archive.h"

namespace parla::convert {

namespace fs = std::filesystem;

// Read member by member (core/bounded_json.h): a JSON tree of a 256 MB vocab.json would take several times the file.
std::vector<std::string> read_hf_vocab(const std::string& path) {
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

int64_t hf_piece_id(const std::vector<std::string>& pieces, const std::string& piece, const std::string& path) {
  for (size_t i = 0; i < pieces.size(); ++i)
    if (pieces[i] == piece) return static_cast<int64_t>(i);
  throw DataError(path + ": has no '" + piece + "' piece");
}

namespace {
// model.safetensors, else a pytorch_model.bin in torch.save's zip format (torch >= 1.6).
std::string weights_file(const std::string& dir, const std::string& model_class) {
  const std::string st = (fs::path(dir) / "model.safetensors").string();
  if (fs::exists(st)) return st;
  const std::string bin = (fs::path(dir) / "pytorch_model.bin").string();
  if (!fs::exists(bin)) throw DataError(st + ": missing (the weights of a Hugging Face model folder)");
  const auto mapped = formats::MappedFile::open(bin);  // a regular file, or DataError naming it
  if (!formats::looks_like_zip(mapped->data(), mapped->size()))
    throw DataError(bin + ": is in torch.save's legacy format (a bare pickle, torch < 1.6), which parla does not "
                    "read; re-save the folder as safetensors: python -c \"from transformers import " + model_class +
                    "; " + model_class + ".from_pretrained('" + dir + "').save_pretrained('" + dir +
                    "', safe_serialization=True)\"");
  return bin;
}
}  // namespace

HfWeights::HfWeights(const std::string& dir, const std::string& model_class)
    : path_(weights_file(dir, model_class)), archive_(models::TensorArchive::load(path_)) {}

std::vector<int64_t> HfWeights::shape(const std::string& name) const {
  torch::Tensor t;  // a view of the file's bytes: only the header is read
  if (!archive_.try_read(name, t)) throw DataError(path_ + ": has no tensor '" + name + "'");
  return t.sizes().vec();
}

torch::Tensor HfWeights::get(const std::string& name, std::vector<int64_t> shape) {
  torch::Tensor t;
  if (!archive_.try_read(name, t)) throw DataError(path_ + ": has no tensor '" + name + "'");
  if (!t.is_floating_point()) throw DataError(path_ + ": tensor '" + name + "' is not floating point");
  if (t.sizes().vec() != shape)
    throw DataError(path_ + ": tensor '" + name + "' has shape " + c10::str(t.sizes()) + ", config.json says " +
                    c10::str(c10::IntArrayRef(shape)));
  used_.insert(name);
  auto copy = t.to(torch::kFloat).clone();
  archive_.release(name);  // the file's pages of it leave memory: the peak holds each weight once
  return copy;
}

void HfWeights::check_all_used(const std::string& what) const {
  for (const auto& name : archive_.tensor_names())
    if (!used_.count(name))
      throw DataError(path_ + ": tensor '" + name + "' has no place in a " + what + " parla can represent");
}

ModelConfig read_bart_config(const formats::JsonFields& c, const std::string& config_path,
                             const std::string& default_activation) {
  // Every count parla keeps as an int is checked in range before it is narrowed.
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  const int64_t heads = c.integer("encoder_attention_heads", 1, kIntMax);
  if (c.integer("decoder_attention_heads") != heads)
    throw DataError(config_path + ": encoder_attention_heads and decoder_attention_heads differ; parla has one "
                    "model.heads");
  const int64_t ffn = c.integer("encoder_ffn_dim", 1, kIntMax);
  if (c.integer("decoder_ffn_dim") != ffn)
    throw DataError(config_path + ": encoder_ffn_dim and decoder_ffn_dim differ; parla has one model.ffn_dim");
  std::string act = c.has("activation_function") ? c.string("activation_function") : default_activation;
  if (act == "silu") act = "swish";
  if (act != "swish" && act != "relu" && act != "gelu")
    throw DataError(config_path + ": activation_function '" + act + "' is not one parla has (swish, relu, gelu)");
  ModelConfig cfg;
  cfg.type = ModelType::kTransformer;
  cfg.d_model = static_cast<int>(c.integer("d_model", 1, kIntMax));
  cfg.heads = static_cast<int>(heads);
  cfg.ffn_dim = static_cast<int>(ffn);
  cfg.encoder_layers = static_cast<int>(c.integer("encoder_layers", 1, kIntMax));
  cfg.decoder_layers = static_cast<int>(c.integer("decoder_layers", 1, kIntMax));
  config::parse_choice(act, cfg.activation);  // checked above
  cfg.positions = PositionEncoding::kSinusoidal;
  cfg.scale_embeddings = c.has("scale_embedding") && c.boolean("scale_embedding");
  cfg.max_positions = static_cast<int>(c.integer("max_position_embeddings", 1, kIntMax));
  cfg.dropout = c.has("dropout") ? c.number("dropout") : 0.1;
  cfg.attention_dropout = c.has("attention_dropout") ? c.number("attention_dropout") : 0.0;
  cfg.activation_dropout = c.has("activation_dropout") ? c.number("activation_dropout") : 0.0;
  cfg.tie_output = !c.has("tie_word_embeddings") || c.boolean("tie_word_embeddings");
  return cfg;
}

nlohmann::json bart_config_json(const ModelConfig& cfg, int64_t max_positions) {
  return {{"d_model", cfg.d_model},
          {"encoder_layers", cfg.encoder_layers},
          {"decoder_layers", cfg.decoder_layers},
          {"encoder_attention_heads", cfg.heads},
          {"decoder_attention_heads", cfg.heads},
          {"encoder_ffn_dim", cfg.ffn_dim},
          {"decoder_ffn_dim", cfg.ffn_dim},
          {"activation_function", cfg.activation},
          {"dropout", cfg.dropout},
          {"attention_dropout", cfg.attention_dropout},
          {"activation_dropout", cfg.activation_dropout},
          {"encoder_layerdrop", 0.0},
          {"decoder_layerdrop", 0.0},
          {"max_position_embeddings", max_positions},
          {"scale_embedding", cfg.scale_embeddings},
          {"is_encoder_decoder", true},
          {"use_cache", true}};
}

void read_hf_layers(HfWeights& w, ImportedModel& m) {
  const int64_t d = m.model.d_model, ffn = m.model.ffn_dim;
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
    for (int l = 0; l < (decoder ? m.model.decoder_layers : m.model.encoder_layers); ++l) {
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
}

}  // namespace parla::convert

#include "convert/marian_import.h"

#include <array>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include "core/error.h"
#include "formats/bounded_file.h"
#include "formats/mapped_file.h"
#include "formats/npz.h"
#include "text/sentencepiece_model_check.h"

namespace parla::convert {

namespace {

namespace fs = std::filesystem;

YAML::Node parse_yaml(const std::string& text, const std::string& what) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw DataError(what + ": not valid YAML (" + std::string(e.what()).substr(0, 200) + ")");
  }
}

YAML::Node load_yaml_file(const std::string& path, uint64_t max_bytes) {
  return parse_yaml(formats::read_bounded_file(path, max_bytes), path);
}

// Marian's options (special:model.yml): typed reads that name the file and the option.
class Options {
 public:
  Options(YAML::Node n, std::string where) : n_(std::move(n)), where_(std::move(where)) {
    if (!n_.IsMap()) throw DataError(where_ + ": the model's options are not a YAML map");
  }
  bool has(const std::string& key) const { return n_[key].IsDefined() && !n_[key].IsNull(); }
  template <class T>
  T get(const std::string& key) const {
    if (!has(key)) throw DataError(where_ + ": option '" + key + "' is missing");
    try {
      return n_[key].as<T>();
    } catch (const YAML::Exception&) {
      throw DataError(where_ + ": option '" + key + "' has an unexpected value");
    }
  }
  template <class T>
  T get(const std::string& key, T fallback) const {
    return has(key) ? get<T>(key) : fallback;
  }

 private:
  YAML::Node n_;
  std::string where_;
};

// The arrays of the .npz as float tensors, each used once.
class Arrays {
 public:
  explicit Arrays(const std::string& path) : path_(path) {
    auto file = formats::MappedFile::open(path);
    try {
      arrays_ = formats::read_npz(file->data(), file->size());
    } catch (const DataError& e) {
      file->check_unchanged();  // what looked damaged was a file cut short while it was read
      throw DataError(path + ": " + e.what());
    }
    file->check_unchanged();  // the arrays were copied out of a file that was being replaced: refused
  }
  bool has(const std::string& name) const { return arrays_.count(name) > 0; }
  // The text of a byte array ("special:model.yml").
  std::string text(const std::string& name) {
    auto& e = entry(name);
    if (e.array.dtype != formats::DType::I8 && e.array.dtype != formats::DType::U8)
      throw DataError(path_ + ": '" + name + "' is not a byte array");
    std::string s = e.bytes.substr(e.array.data_offset, e.array.data_bytes);
    while (!s.empty() && s.back() == '\0') s.pop_back();
    used_.insert(name);
    return s;
  }
  // Array `name` as a float tensor, which must have `shape`.
  torch::Tensor get(const std::string& name, std::vector<int64_t> shape) {
    auto& e = entry(name);
    if (e.array.shape != shape)
      throw DataError(path_ + ": '" + name + "' has shape " + c10::str(c10::IntArrayRef(e.array.shape)) +
                      ", the model's options need " + c10::str(c10::IntArrayRef(shape)));
    torch::ScalarType type;
    switch (e.array.dtype) {
      case formats::DType::F32: type = torch::kFloat; break;
      case formats::DType::F16: type = torch::kHalf; break;
      case formats::DType::F64: type = torch::kDouble; break;
      default: throw DataError(path_ + ": '" + name + "' is not a floating-point array");
    }
    auto t = torch::empty(shape, torch::TensorOptions().dtype(type));
    std::memcpy(t.data_ptr(), e.bytes.data() + e.array.data_offset, e.array.data_bytes);
    used_.insert(name);
    return t.to(torch::kFloat);
  }
  void check_all_used() const {
    for (const auto& [name, e] : arrays_)
      if (!used_.count(name))
        throw DataError(path_ + ": '" + name + "' has no place in a model parla can represent (another architecture "
                        "or an option parla does not have)");
  }

 private:
  formats::NpzEntry& entry(const std::string& name) {
    auto it = arrays_.find(name);
    if (it == arrays_.end()) throw DataError(path_ + ": has no array '" + name + "'");
    return it->second;
  }
  std::string path_;
  std::map<std::string, formats::NpzEntry> arrays_;
  std::set<std::string> used_;
};

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A file that decoder.yml names under `key`: a relative path inside the folder, refused up front otherwise (an
// absolute path, '..' or a symbolic link would read some other file of the machine, refused only later, on content).
std::string path_in(const std::string& dir, const std::string& name, const std::string& decoder_path,
                    const std::string& key) {
  const fs::path p(name);
  auto refuse = [&](const std::string& why) {
    throw DataError(decoder_path + ": '" + key + "' names '" + name.substr(0, 200) + "', " + why +
                    "; it must name a file inside the model's folder");
  };
  if (name.empty()) refuse("an empty path");
  if (p.is_absolute()) refuse("an absolute path");
  for (const auto& part : p)
    if (part == "..") refuse("a path through '..'");
  // Every step below the folder must be a plain folder or file: a link anywhere could lead out of it.
  fs::path at(dir);
  for (const auto& part : p) {
    at /= part;
    std::error_code ec;
    if (fs::is_symlink(fs::symlink_status(at, ec))) refuse("a symbolic link ('" + at.string() + "')");
  }
  return at.string();
}

// The model config Marian's options (special:model.yml of `npz`) describe; DataError naming the option for what
// parla does not import (another model type, pre-norm, SSRU or average-attention decoders, tied layers,
// right-to-left, trained positions, another activation or feed-forward depth).
ModelConfig model_config_of(const Options& o, const std::string& npz) {
  const std::string type = o.get<std::string>("type");
  if (type != "transformer")
    throw DataError(npz + ": model type '" + type + "' (option 'type'); parla imports Marian's transformer");
  auto require = [&](const std::string& key, const std::string& wanted, const std::string& why) {
    const std::string v = o.get<std::string>(key, wanted);
    if (v != wanted) throw DataError(npz + ": option '" + key + "' is '" + v + "': " + why);
  };
  require("transformer-preprocess", "", "only post-norm ('' before, 'dan' after each sublayer) is imported");
  require("transformer-postprocess", "dan", "only post-norm ('dan') is imported");
  require("transformer-decoder-autoreg", "self-attention", "SSRU and average-attention decoders are not imported");
  if (o.has("transformer-tied-layers") && o.get<YAML::Node>("transformer-tied-layers").size() > 0)
    throw DataError(npz + ": option 'transformer-tied-layers' is not empty: tied layers are not imported");
  if (o.get<bool>("right-left", false)) throw DataError(npz + ": option 'right-left' is true: not imported");
  if (o.get<bool>("transformer-train-position-embeddings", false))
    throw DataError(npz + ": option 'transformer-train-position-embeddings' is true: trained positions are not imported");
  if (o.get<int>("transformer-ffn-depth", 2) != 2)
    throw DataError(npz + ": option 'transformer-ffn-depth' is not 2: not imported");
  std::string act = o.get<std::string>("transformer-ffn-activation", "swish");
  if (act != "swish" && act != "relu")
    throw DataError(npz + ": option 'transformer-ffn-activation' is '" + act + "' (parla imports swish and relu)");

  ModelConfig cfg;
  const int64_t d = o.get<int64_t>("dim-emb"), ffn = o.get<int64_t>("transformer-dim-ffn");
  cfg.type = ModelType::kTransformer;
  // Checked before narrowing to parla's int (a count of 4294967298 would be read as 2).
  for (auto [key, v] : {std::pair{"dim-emb", d}, std::pair{"transformer-dim-ffn", ffn}})
    if (v < 1 || v > std::numeric_limits<int>::max())
      throw DataError(npz + ": option '" + key + "' is " + std::to_string(v) + ", out of range");
  cfg.d_model = static_cast<int>(d);
  cfg.ffn_dim = static_cast<int>(ffn);
  cfg.heads = o.get<int>("transformer-heads");
  cfg.encoder_layers = o.get<int>("enc-depth");
  cfg.decoder_layers = o.get<int>("dec-depth");
  config::parse_choice(act, cfg.activation);  // checked above
  cfg.norm = LayerNormPlacement::kPost;
  cfg.positions = PositionEncoding::kSinusoidal;
  cfg.sinusoidal_layout = SinusoidalLayout::kConcatenated;
  cfg.scale_embeddings = true;
  cfg.output_bias = true;
  cfg.decoder_start = DecoderStart::kPad;
  cfg.dropout = o.get<double>("transformer-dropout", 0.1);
  cfg.attention_dropout = o.get<double>("transformer-dropout-attention", 0.0);
  cfg.activation_dropout = o.get<double>("transformer-dropout-ffn", 0.0);
  const bool tied_all = o.get<bool>("tied-embeddings-all", false), tied_src = o.get<bool>("tied-embeddings-src", false);
  cfg.share_embeddings = tied_all || tied_src;
  cfg.tie_output = tied_all || o.get<bool>("tied-embeddings", false);
  return cfg;
}

// The encoder and decoder layers of `a` into m.weights under parla's names (Marian's matrices are [in, out]).
void read_marian_layers(Arrays& a, ImportedModel& m) {
  const ModelConfig& cfg = m.model;
  const int64_t d = cfg.d_model, ffn = cfg.ffn_dim;
  auto linear = [&](const std::string& from, const std::string& to, int64_t in, int64_t out, const char* w,
                    const char* b) {
    m.weights[to + ".weight"] = a.get(from + w, {in, out}).t().contiguous();
    m.weights[to + ".bias"] = a.get(from + b, {1, out}).view({out});
  };
  auto norm = [&](const std::string& from, const std::string& to) {
    m.weights[to + ".weight"] = a.get(from + "_ln_scale", {1, d}).view({d});
    m.weights[to + ".bias"] = a.get(from + "_ln_bias", {1, d}).view({d});
  };
  // Stacked projections in parla's row order.
  auto stacked = [&](const std::string& from, const std::vector<std::string>& parts, const std::string& to) {
    std::vector<torch::Tensor> ws, bs;
    for (const auto& p : parts) {
      ws.push_back(a.get(from + "_W" + p, {d, d}).t());
      bs.push_back(a.get(from + "_b" + p, {1, d}).view({d}));
    }
    m.weights[to + ".weight"] = torch::cat(ws, 0).contiguous();
    m.weights[to + ".bias"] = torch::cat(bs, 0);
  };
  auto ffn_block = [&](const std::string& from, const std::string& to) {
    linear(from + "_ffn", to + ".ffn.fc1", d, ffn, "_W1", "_b1");
    linear(from + "_ffn", to + ".ffn.fc2", ffn, d, "_W2", "_b2");
    norm(from + "_ffn_ffn", to + ".ffn_norm");
  };
  for (int l = 0; l < cfg.encoder_layers; ++l) {
    const std::string from = "encoder_l" + std::to_string(l + 1), to = "encoder.layers." + std::to_string(l);
    stacked(from + "_self", {"q", "k", "v"}, to + ".self_attn.qkv_proj");
    linear(from + "_self", to + ".self_attn.out_proj", d, d, "_Wo", "_bo");
    norm(from + "_self_Wo", to + ".self_attn_norm");
    ffn_block(from, to);
  }
  for (int l = 0; l < cfg.decoder_layers; ++l) {
    const std::string from = "decoder_l" + std::to_string(l + 1), to = "decoder.layers." + std::to_string(l);
    stacked(from + "_self", {"q", "k", "v"}, to + ".self_attn.qkv_proj");
    linear(from + "_self", to + ".self_attn.out_proj", d, d, "_Wo", "_bo");
    norm(from + "_self_Wo", to + ".self_attn_norm");
    linear(from + "_context", to + ".cross_attn.q_proj", d, d, "_Wq", "_bq");
    stacked(from + "_context", {"k", "v"}, to + ".cross_attn.kv_proj");
    linear(from + "_context", to + ".cross_attn.out_proj", d, d, "_Wo", "_bo");
    norm(from + "_context_Wo", to + ".cross_attn_norm");
    ffn_block(from, to);
  }
}

}  // namespace

ImportedModel read_marian(const std::string& dir) {
  const std::string decoder_path = (fs::path(dir) / "decoder.yml").string();
  const auto decoder = load_yaml_file(decoder_path, 1u << 20);
  std::string model_name;
  std::vector<std::string> vocab_names;
  try {
    if (!decoder["models"].IsSequence() || decoder["models"].size() != 1)
      throw DataError(decoder_path + ": 'models' must list one model (ensembles are imported one member at a time)");
    model_name = decoder["models"][0].as<std::string>();
    for (const auto& v : decoder["vocabs"]) vocab_names.push_back(v.as<std::string>());
  } catch (const YAML::Exception&) {
    throw DataError(decoder_path + ": 'models' and 'vocabs' must be lists of file names");
  }
  if (vocab_names.size() != 2) throw DataError(decoder_path + ": 'vocabs' must name a source and a target vocabulary");
  for (const auto& v : vocab_names)
    if (!ends_with(v, ".yml") && !ends_with(v, ".yaml"))
      throw DataError(decoder_path + ": vocabulary '" + v + "' is not a .vocab.yml; parla imports Marian models "
                      "whose vocabularies are YAML piece tables (OPUS-MT's)");

  // Every file decoder.yml names is checked before any is opened.
  const std::string npz = path_in(dir, model_name, decoder_path, "models");
  const std::string src_path = path_in(dir, vocab_names[0], decoder_path, "vocabs"),
                    tgt_path = path_in(dir, vocab_names[1], decoder_path, "vocabs");
  Arrays a(npz);
  // Marian's options are a few KB; yaml-cpp's tree of a large one would cost about 60 times its size.
  const std::string options = a.text("special:model.yml");
  if (options.size() > (1u << 20))
    throw DataError(npz + ": 'special:model.yml' has " + std::to_string(options.size()) +
                    " bytes, more than the 1 MiB Marian's options could take");
  const Options o(parse_yaml(options, npz + " (special:model.yml)"), npz + " special:model.yml");
  ImportedModel m;
  m.model = model_config_of(o, npz);
  const ModelConfig& cfg = m.model;
  const int64_t d = cfg.d_model;
  // Vocabularies, each with <pad> appended (Marian has none; its start is a zero vector).
  auto src_vocab = read_marian_vocab(src_path);
  auto tgt_vocab = src_path == tgt_path ? src_vocab : read_marian_vocab(tgt_path);
  if (cfg.share_embeddings && src_vocab != tgt_vocab)
    throw DataError(npz + ": tied embeddings, but " + src_path + " and " + tgt_path + " differ");
  auto specials = [](std::vector<std::string>& v, const std::string& path) {
    std::array<int64_t, 2> ids = {-1, -1};  // eos, unk
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] == "</s>") ids[0] = static_cast<int64_t>(i);
      if (v[i] == "<unk>") ids[1] = static_cast<int64_t>(i);
      if (v[i] == "<pad>") throw DataError(path + ": has a '<pad>' piece, which Marian's vocabularies do not");
    }
    if (ids[0] < 0 || ids[1] < 0) throw DataError(path + ": lacks '</s>' or '<unk>'");
    v.push_back("<pad>");
    return ids;
  };
  const auto s = specials(src_vocab, src_path), t = specials(tgt_vocab, tgt_path);
  const int64_t vs = static_cast<int64_t>(src_vocab.size()), vt = static_cast<int64_t>(tgt_vocab.size());
  const auto order_s = parla_order(vs, vs - 1, s[1], s[0], src_path);
  const auto order_t = parla_order(vt, vt - 1, t[1], t[0], tgt_path);
  for (int64_t id : order_s) m.src_pieces.push_back(src_vocab[static_cast<size_t>(id)]);
  for (int64_t id : order_t) m.tgt_pieces.push_back(tgt_vocab[static_cast<size_t>(id)]);
  m.src_spm = formats::read_bounded_file((fs::path(dir) / "source.spm").string(), 64u << 20);
  m.tgt_spm = formats::read_bounded_file((fs::path(dir) / "target.spm").string(), 64u << 20);
  text::check_sentencepiece_model(m.src_spm, (fs::path(dir) / "source.spm").string());
  text::check_sentencepiece_model(m.tgt_spm, (fs::path(dir) / "target.spm").string());

  // Weights: Marian's matrices are [in, out] (x W), parla's [out, in]; biases and norms are [1, n].
  auto with_pad_row = [](const torch::Tensor& table) {
    return torch::cat({table, torch::zeros({1, table.size(1)})}, 0);
  };
  auto permuted = [](const torch::Tensor& t, const std::vector<int64_t>& order) {
    return t.index_select(0, torch::tensor(order, torch::kLong));
  };
  if (cfg.share_embeddings) {
    const auto table = with_pad_row(a.get("Wemb", {vt - 1, d}));
    m.weights["tgt_embed.weight"] = permuted(table, order_t);
  } else {
    m.weights["src_embed.weight"] = permuted(with_pad_row(a.get("encoder_Wemb", {vs - 1, d})), order_s);
    m.weights["tgt_embed.weight"] = permuted(with_pad_row(a.get("decoder_Wemb", {vt - 1, d})), order_t);
  }
  if (!cfg.tie_output)
    m.weights["output_weight"] = permuted(with_pad_row(a.get("decoder_ff_logit_out_W", {d, vt - 1}).t()), order_t);
  auto bias = torch::cat({a.get("decoder_ff_logit_out_b", {1, vt - 1}).view({vt - 1}), torch::zeros({1})});
  m.weights["output_bias"] = permuted(bias, order_t);

  read_marian_layers(a, m);
  a.check_all_used();
  m.info = {{"imported_from", dir}, {"format", "marian"}, {"model_file", model_name}};
  return m;
}

}  // namespace parla::convert

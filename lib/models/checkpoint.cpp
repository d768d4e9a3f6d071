#include "models/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <new>
#include <set>

#include <torch/torch.h>

#include "core/bounded_json.h"
#include "core/config.h"
#include "core/error.h"
#include "models/allocation_budget.h"
#include "models/bert.h"
#include "models/factory.h"
#include "models/int8_quantization.h"
#include "nn/skipped_initialization.h"

namespace parla::models {

namespace {

torch::Tensor bytes_to_tensor(const std::string& s) {
  auto t = torch::empty({static_cast<int64_t>(s.size())}, torch::kUInt8);
  if (!s.empty()) std::memcpy(t.data_ptr<uint8_t>(), s.data(), s.size());
  return t;
}

std::string tensor_to_bytes(const torch::Tensor& t) {
  auto c = t.to(torch::kCPU, torch::kUInt8).contiguous();
  return std::string(reinterpret_cast<const char*>(c.data_ptr<uint8_t>()), static_cast<size_t>(c.numel()));
}

// Reads and checks the parla entries; DataError naming the file otherwise.
ModelMeta read_meta_from(const TensorArchive& archive) {
  const std::string& path = archive.path();
  const std::string* format = archive.read_string("parla_format");
  const std::string* text = archive.read_string("parla_meta");
  if (!format || !text) throw DataError(path + ": not a parla checkpoint (no parla_format/parla_meta entries)");
  const int64_t expected = archive.legacy() ? kLegacyCheckpointFormat : kCheckpointFormat;
  if (*format != std::to_string(expected))
    throw DataError(path + ": checkpoint format '" + format->substr(0, 20) + "' is not supported (expected " +
                    std::to_string(expected) + " in a " + (archive.legacy() ? "TorchScript archive" : "safetensors file") +
                    ")");
  ModelMeta meta;
  try {
    // Bounded (core/bounded_json.h): a parla_meta nested 150,000 deep overflowed the stack of every reader.
    const auto j = parse_bounded_json(*text, JsonLimits{}, path + ": parla_meta");
    meta.config = j.value("config", nlohmann::json::object());
    meta.info = j.value("info", nlohmann::json::object());
    meta.src_vocab_size = j.value("src_vocab_size", int64_t{0});
    meta.tgt_vocab_size = j.value("tgt_vocab_size", int64_t{0});
    meta.int8 = j.value("int8", std::vector<std::string>{});
    meta.control_pieces = j.value("control_pieces", std::vector<std::string>{});
    meta.languages = j.value("languages", nlohmann::json::object());
    if (!meta.languages.is_object()) throw DataError(path + ": corrupt checkpoint metadata (languages)");
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path + ": corrupt checkpoint metadata (" + std::string(e.what()).substr(0, 200) + ")");
  }
  torch::Tensor spm;
  if (archive.try_read("parla_src_spm", spm)) meta.src_spm = tensor_to_bytes(spm);
  if (archive.try_read("parla_tgt_spm", spm)) meta.tgt_spm = tensor_to_bytes(spm);
  for (auto [entry, pieces] : {std::pair{"parla_src_pieces", &meta.src_pieces}, std::pair{"parla_tgt_pieces", &meta.tgt_pieces}}) {
    const std::string* text = archive.read_string(entry);
    if (!text) continue;
    try {
      JsonLimits flat;
      flat.max_depth = 1;  // an array of strings
      *pieces = parse_bounded_json(*text, flat, path + ": " + entry).get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception& e) {
      throw DataError(path + ": corrupt " + entry + " (" + std::string(e.what()).substr(0, 200) + ")");
    }
  }
  return meta;
}

// The stored tensor of the model's parameter or buffer `name`; DataError naming the file where there is none.
torch::Tensor model_tensor(const TensorArchive& archive, const std::string& name) {
  torch::Tensor value;
  if (!archive.try_read("model." + name, value))
    throw DataError(archive.path() + ": checkpoint does not match the model: no tensor '" + name + "'");
  return value;
}

// `skip`: weights that the int8 entries hold instead.
void load_module(const TensorArchive& archive, torch::nn::Module& model, const std::vector<std::string>& skip = {}) {
  const std::string& path = archive.path();
  torch::NoGradGuard no_grad;
  auto load = [&](const std::string& name, torch::Tensor& target) {
    const torch::Tensor value = model_tensor(archive, name);
    if (value.sizes() != target.sizes())
      throw DataError(path + ": checkpoint does not match the model: '" + name + "' has shape " +
                      c10::str(value.sizes()) + ", the model expects " + c10::str(target.sizes()));
    target.copy_(value);
    archive.release("model." + name);  // the file's copy leaves memory: the peak holds the model once, not twice
  };
  for (auto& p : model.named_parameters(true))
    if (std::find(skip.begin(), skip.end(), p.key()) == skip.end()) load(p.key(), p.value());
  for (auto& b : model.named_buffers(true)) load(b.key(), b.value());
}

// Each weight quantized from its view of the file, whose pages then go: the peak holds one float matrix, not the
// model.
void quantize_while_loading(const TensorArchive& archive, Seq2SeqModel& model, const std::vector<std::string>& names) {
  const std::string& path = archive.path();
  torch::NoGradGuard no_grad;
  for (const auto& name : names) {
    const torch::Tensor value = model_tensor(archive, name);
    if (value.dim() != 2 || !use_int8_weight(model, name, nn::Int8Matrix::quantize(value.to(torch::kFloat))))
      throw DataError(path + ": checkpoint does not match the model: '" + name + "' has shape " +
                      c10::str(value.sizes()) + ", which the model's weight does not have");
    archive.release("model." + name);
  }
}

void load_int8(const TensorArchive& archive, Seq2SeqModel& model, const std::vector<std::string>& names) {
  const std::string& path = archive.path();
  // Every stored matrix is checked against the config's shape before any is packed: packing pads each row to the
  // product's panel width, so a matrix stored one column wide (or named twice) would grow many times its bytes in
  // the file before use_int8_weight could refuse it.
  std::set<std::string> seen;
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!seen.insert(names[i]).second)
      throw DataError(path + ": int8 checkpoint names the weight '" + names[i] + "' twice");
    // Format 1 numbered them; format 2 names them after the weight.
    const std::string base = archive.legacy() ? "int8." : "int8." + names[i] + ".";
    const std::string suffix = archive.legacy() ? "_" + std::to_string(i) : "";
    torch::Tensor values, scales;
    if (!archive.try_read(base + "values" + suffix, values) || !archive.try_read(base + "scales" + suffix, scales))
      throw DataError(path + ": int8 checkpoint lacks the weights of '" + names[i] + "'");
    const std::vector<int64_t> want = int8_weight_shape(model, names[i]);
    if (want.empty())
      throw DataError(path + ": checkpoint does not match the model: the model has no quantizable weight '" +
                      names[i] + "'");
    if (values.scalar_type() != torch::kChar || scales.scalar_type() != torch::kFloat ||
        values.sizes().vec() != want || scales.dim() != 1 || scales.size(0) != want[0])
      throw DataError(path + ": checkpoint does not match the model: int8 weight '" + names[i] + "' has shape " +
                      c10::str(values.sizes()) + " (" + std::string(c10::toString(values.scalar_type())) +
                      ") and scales " + c10::str(scales.sizes()) + " (" +
                      std::string(c10::toString(scales.scalar_type())) + "), the model expects " +
                      c10::str(c10::IntArrayRef(want)) + " (Char) and [" + std::to_string(want[0]) + "] (Float)");
  }
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string base = archive.legacy() ? "int8." : "int8." + names[i] + ".";
    const std::string suffix = archive.legacy() ? "_" + std::to_string(i) : "";
    torch::Tensor values, scales;
    archive.try_read(base + "values" + suffix, values);
    archive.try_read(base + "scales" + suffix, scales);
    // Packed straight from the file: where the panels hold the codes (nn/int8_matrix.h) no copy of them is made
    // at all; elsewhere they are copied out of the file,
    // since the model keeps them for as long as it lives.
    auto m = nn::Int8Matrix::from(values, scales.clone());
    if (!m.codes_in_panels()) m.values = m.values.clone();
    const bool used = use_int8_weight(model, names[i], std::move(m));
    archive.release(base + "values" + suffix);
    archive.release(base + "scales" + suffix);
    if (!used)  // the shapes were checked above: only a weight the model shares between names gets here
      throw DataError(path + ": checkpoint does not match the model: int8 weight '" + names[i] + "' is not usable");
  }
}

}  // namespace

namespace {

text::SentencePieceVocab vocab_of(const std::string& spm, const std::vector<std::string>& pieces,
                                  const std::vector<std::string>& controls, const std::string& path, const char* side) {
  if (spm.empty()) throw DataError(path + ": checkpoint has no " + side + " SentencePiece model");
  try {
    return pieces.empty() ? text::SentencePieceVocab::from_serialized(spm)
                          : text::SentencePieceVocab::from_serialized(spm, pieces, controls);
  } catch (const DataError& e) {
    throw DataError(path + ": the " + side + " vocabulary does not load: " + e.what());
  }
}

}  // namespace

text::SentencePieceVocab source_vocab(const ModelMeta& meta, const std::string& path) {
  return vocab_of(meta.src_spm, meta.src_pieces, meta.control_pieces, path, "source");
}

text::SentencePieceVocab target_vocab(const ModelMeta& meta, const std::string& path) {
  return vocab_of(meta.tgt_spm, meta.tgt_pieces, meta.control_pieces, path, "target");
}

std::pair<text::SentencePieceVocab, text::SentencePieceVocab> vocabularies(const ModelMeta& meta,
                                                                         const std::string& path) {
  auto source = source_vocab(meta, path);
  if (meta.tgt_spm == meta.src_spm && meta.tgt_pieces == meta.src_pieces) return {source, source};
  return {source, target_vocab(meta, path)};
}

void require_float_checkpoint(const ModelMeta& meta, const std::string& path, const std::string& use) {
  if (!meta.int8.empty())
    throw DataError(path + ": is an int8 checkpoint (parla-train quantize), which only translates; " + use +
                    " needs the float checkpoint it was quantized from");
}

void build_within_file_budget(const std::string& path, const std::function<void()>& build, uint64_t overhead_bytes) {
  std::error_code ec;
  const uint64_t file = std::filesystem::file_size(path, ec);
  const uint64_t limit = (ec ? 0 : 4 * file) + (uint64_t{256} << 20);
  const auto refuse = [&](const std::string& what) {
    return DataError(path + ": the model config stored in the checkpoint describes a model of more than " +
                     std::to_string(limit >> 20) + " MiB" + what + ", but the file holds " +
                     std::to_string(file >> 20) + " MiB: a damaged or hostile config (vocabulary sizes, layers " +
                     "or model dimensions)");
  };
  if (overhead_bytes >= limit)
    throw refuse(" (its layers' modules alone take " + std::to_string(overhead_bytes >> 20) + " MiB)");
  AllocationBudget budget(limit - overhead_bytes);
  try {
    build();
  } catch (const ConfigError&) {
    throw;  // the caller names the file and the key
  } catch (const DataError&) {
    throw;
  } catch (const std::exception& e) {
    if (budget.exceeded()) throw refuse("");
    // Sizes whose byte count overflows never reach the allocator: LibTorch refuses them with a message of its
    // own ("Storage size calculation overflowed"), which names no file.
    throw DataError(path + ": the model config stored in the checkpoint describes a model that cannot be built (" +
                    brief_reason(e) + "): a damaged or hostile config (vocabulary sizes, layers or model dimensions)");
  } catch (...) {
    if (!budget.exceeded()) throw;
    throw refuse("");
  }
}

void save_checkpoint(const std::string& path, torch::nn::Module& model, const ModelMeta& meta,
                     const std::function<void(TensorArchive&)>& extra) {
  nlohmann::json j;
  j["config"] = meta.config;
  j["info"] = meta.info;
  int64_t src_vocab = meta.src_vocab_size, tgt_vocab = meta.tgt_vocab_size;
  if (auto* s = dynamic_cast<Seq2SeqModel*>(&model)) {
    src_vocab = s->source_vocab_size();
    tgt_vocab = s->vocab_size();
  } else if (auto* b = dynamic_cast<BertModel*>(&model)) {
    src_vocab = tgt_vocab = b->vocab_size();
  }
  j["src_vocab_size"] = src_vocab;
  j["tgt_vocab_size"] = tgt_vocab;
  std::vector<std::pair<std::string, const nn::Int8Matrix*>> int8;
  if (auto* s = dynamic_cast<Seq2SeqModel*>(&model)) int8 = int8_weights(*s);
  std::vector<std::string> int8_names;
  for (const auto& w : int8) int8_names.push_back(w.first);
  if (!int8.empty()) j["int8"] = int8_names;
  if (!meta.control_pieces.empty()) j["control_pieces"] = meta.control_pieces;
  if (!meta.languages.empty()) j["languages"] = meta.languages;

  TensorArchive archive;
  archive.write("format", std::string("pt"));  // what Hugging Face's tools expect of a PyTorch safetensors file
  archive.write("parla_format", std::to_string(kCheckpointFormat));
  // Paths in "info" are bytes from the file system: invalid UTF-8 is replaced rather than failing the save.
  archive.write("parla_meta", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  archive.write("parla_src_spm", bytes_to_tensor(meta.src_spm));
  archive.write("parla_tgt_spm", bytes_to_tensor(meta.tgt_spm));
  if (!meta.src_pieces.empty()) archive.write("parla_src_pieces", nlohmann::json(meta.src_pieces).dump());
  if (!meta.tgt_pieces.empty()) archive.write("parla_tgt_pieces", nlohmann::json(meta.tgt_pieces).dump());
  for (const auto& p : model.named_parameters(true))
    if (std::find(int8_names.begin(), int8_names.end(), p.key()) == int8_names.end())
      archive.write("model." + p.key(), p.value());
  for (const auto& b : model.named_buffers(true)) archive.write("model." + b.key(), b.value());
  for (const auto& [name, m] : int8) {
    archive.write("int8." + name + ".values", m->codes());
    archive.write("int8." + name + ".scales", m->scales);
  }
  if (extra) extra(archive);
  archive.save(path);
}

ModelMeta read_meta(const std::string& path) {
  const auto archive = TensorArchive::load(path);
  ModelMeta meta = read_meta_from(archive);
  archive.check_unchanged();
  return meta;
}

void load_weights(const std::string& path, torch::nn::Module& model,
                  const std::function<void(const TensorArchive&)>& extra) {
  const auto params = model.parameters(true);
  const auto archive = TensorArchive::load(path, params.empty() ? torch::Device(torch::kCPU) : params.front().device());
  const ModelMeta meta = read_meta_from(archive);
  require_float_checkpoint(meta, path, "loading weights into a model for training");
  load_module(archive, model);
  if (extra) extra(archive);
  archive.check_unchanged();  // a file truncated under the load read zeros: refused, not trained on
}

ModelConfig model_config(const ModelMeta& meta, const std::string& path) {
  config::ConfigBuilder builder;
  builder.merge(nlohmann::json{{"model", meta.config.value("model", nlohmann::json::object())}}, "checkpoint " + path);
  return builder.build().model;
}

std::shared_ptr<torch::nn::Module> build_saved_model(const std::string& path, const ModelMeta& meta) {
  if (!meta.config.is_object() || !meta.config.contains("model"))
    throw DataError(path + ": checkpoint metadata has no 'model' config section");
  if (meta.src_vocab_size < 1 || meta.tgt_vocab_size < 1)
    throw DataError(path + ": checkpoint metadata has no vocabulary sizes");
  std::shared_ptr<torch::nn::Module> model;
  try {
    const ModelConfig cfg = model_config(meta, path);
    build_within_file_budget(
        path,
        [&] {
          if (cfg.type == ModelType::kBert)
            model = build_bert(cfg, meta.tgt_vocab_size);
          else
            model = build_seq2seq(cfg, meta.src_vocab_size, meta.tgt_vocab_size);
        },
        module_overhead_bytes(cfg));
  } catch (const ConfigError& e) {
    throw DataError(path + ": the model config stored in the checkpoint is not usable: " + e.what());
  }
  return model;
}

LoadedSeq2Seq load_seq2seq(const std::string& path, const torch::Device& device,
                           const std::function<void(const ModelMeta&)>& on_meta, bool int8) {
  const auto archive = TensorArchive::load(path);
  LoadedSeq2Seq out;
  out.meta = read_meta_from(archive);
  if (on_meta) on_meta(out.meta);
  {
    // Every parameter is read below or replaced by its int8 matrix, strictly: nothing random is needed.
    nn::SkipInitialization skip;
    out.model = std::dynamic_pointer_cast<Seq2SeqModel>(build_saved_model(path, out.meta));
  }
  if (!out.model) throw DataError(path + ": holds a BERT encoder, which does not translate");
  if (!out.meta.int8.empty()) {
    if (!device.is_cpu())
      throw ConfigError("runtime.device: " + path + " is an int8 checkpoint, which decodes on the CPU only");
    load_int8(archive, *out.model, out.meta.int8);
  }
  out.model->to(device);  // before loading, so the weights are copied host to device once
  if (int8 && out.meta.int8.empty() && device.is_cpu()) {
    const auto names = int8_weight_names(*out.model);
    quantize_while_loading(archive, *out.model, names);
    load_module(archive, *out.model, names);
  } else {
    load_module(archive, *out.model, out.meta.int8);
  }
  archive.check_unchanged();  // a file truncated under the load read zeros: refused, not translated with
  out.model->eval();
  return out;
}

}  // namespace parla::models

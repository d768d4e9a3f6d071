#include "models/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "models/bert.h"
#include "models/factory.h"
#include "models/int8_quantization.h"

namespace parla::models {

namespace {

torch::Tensor bytes_to_tensor(const std::string& s) {
  auto t = torch::empty({static_cast<int64_t>(s.size())}, torch::kUInt8);
  if (!s.empty()) std::memcpy(t.data_ptr<uint8_t>(), s.data(), s.size());
  return t;
}

std::string tensor_to_bytes(const torch::Tensor& t) {
  auto c = t.to(torch::kCPU, torch::kUInt8).contiguous();  // the archive may be mapped onto a GPU
  return std::string(reinterpret_cast<const char*>(c.data_ptr<uint8_t>()), static_cast<size_t>(c.numel()));
}

// Loads and checks the parla header; DataError naming the file otherwise. Every tensor of the archive is
// mapped onto `device` whatever device wrote it (without a map location a CUDA-written file needs CUDA).
void open_archive(const std::string& path, torch::serialize::InputArchive& archive, ModelMeta& meta,
                  const torch::Device& device) {
  if (!std::filesystem::exists(path)) throw DataError(path + ": checkpoint file does not exist");
  try {
    archive.load_from(path, device);
  } catch (const std::exception& e) {
    throw DataError(path + ": not a readable checkpoint (" + brief_reason(e) + ")");
  }
  c10::IValue format, text;
  if (!archive.try_read("parla_format", format) || !format.isInt() || !archive.try_read("parla_meta", text) ||
      !text.isString())
    throw DataError(path + ": not a parla checkpoint (no parla_format/parla_meta entries)");
  if (format.toInt() != kCheckpointFormat)
    throw DataError(path + ": checkpoint format " + std::to_string(format.toInt()) + " is not supported (expected " +
                    std::to_string(kCheckpointFormat) + ")");
  try {
    auto j = nlohmann::json::parse(text.toStringRef());
    meta.config = j.value("config", nlohmann::json::object());
    meta.info = j.value("info", nlohmann::json::object());
    meta.src_vocab_size = j.value("src_vocab_size", int64_t{0});
    meta.tgt_vocab_size = j.value("tgt_vocab_size", int64_t{0});
    meta.int8 = j.value("int8", std::vector<std::string>{});
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path + ": corrupt checkpoint metadata (" + e.what() + ")");
  }
  torch::Tensor spm;
  if (archive.try_read("parla_src_spm", spm, true)) meta.src_spm = tensor_to_bytes(spm);
  if (archive.try_read("parla_tgt_spm", spm, true)) meta.tgt_spm = tensor_to_bytes(spm);
}

// Reads "a.b.weight" through the nested sub-archives that Module::save writes.
bool read_nested(torch::serialize::InputArchive& root, const std::string& dotted, torch::Tensor& out, bool buffer) {
  torch::serialize::InputArchive* at = &root;
  size_t start = 0;
  std::deque<torch::serialize::InputArchive> chain;  // stable addresses while it grows
  while (true) {
    size_t dot = dotted.find('.', start);
    if (dot == std::string::npos) return at->try_read(dotted.substr(start), out, buffer);
    chain.emplace_back();
    if (!at->try_read(dotted.substr(start, dot - start), chain.back())) return false;
    at = &chain.back();
    start = dot + 1;
  }
}

// `skip`: weights that an int8 archive holds instead (their "model" entry is a placeholder).
void load_module(const std::string& path, torch::serialize::InputArchive& archive, torch::nn::Module& model,
                 const std::vector<std::string>& skip = {}) {
  torch::serialize::InputArchive weights;
  if (!archive.try_read("model", weights)) throw DataError(path + ": checkpoint has no model weights");
  torch::NoGradGuard no_grad;
  auto load = [&](const std::string& name, torch::Tensor& target, bool buffer) {
    torch::Tensor value;
    bool ok = false;
    try {
      ok = read_nested(weights, name, value, buffer);
    } catch (const std::exception&) {
      ok = false;
    }
    if (!ok) throw DataError(path + ": checkpoint does not match the model: no tensor '" + name + "'");
    if (value.sizes() != target.sizes())
      throw DataError(path + ": checkpoint does not match the model: '" + name + "' has shape " +
                      c10::str(value.sizes()) + ", the model expects " + c10::str(target.sizes()));
    target.copy_(value);
  };
  for (auto& p : model.named_parameters(true))
    if (std::find(skip.begin(), skip.end(), p.key()) == skip.end()) load(p.key(), p.value(), false);
  for (auto& b : model.named_buffers(true)) load(b.key(), b.value(), true);
}

void load_int8(const std::string& path, torch::serialize::InputArchive& archive, Seq2SeqModel& model,
               const std::vector<std::string>& names) {
  torch::serialize::InputArchive int8;
  if (!archive.try_read("int8", int8)) throw DataError(path + ": int8 checkpoint without its int8 weights");
  for (size_t i = 0; i < names.size(); ++i) {
    torch::Tensor values, scales;
    if (!int8.try_read("values_" + std::to_string(i), values) || !int8.try_read("scales_" + std::to_string(i), scales))
      throw DataError(path + ": int8 checkpoint lacks the weights of '" + names[i] + "'");
    if (values.scalar_type() != torch::kChar || scales.scalar_type() != torch::kFloat ||
        !use_int8_weight(model, names[i], nn::Int8Matrix::from(values, scales)))
      throw DataError(path + ": checkpoint does not match the model: int8 weight '" + names[i] + "' has shape " +
                      c10::str(values.sizes()) + " (" + std::string(c10::toString(values.scalar_type())) + ")");
  }
}

}  // namespace

void require_float_checkpoint(const ModelMeta& meta, const std::string& path, const std::string& use) {
  if (!meta.int8.empty())
    throw DataError(path + ": is an int8 checkpoint (parla-train quantize), which only translates; " + use +
                    " needs the float checkpoint it was quantized from");
}

void save_checkpoint(const std::string& path, torch::nn::Module& model, const ModelMeta& meta,
                     const std::function<void(torch::serialize::OutputArchive&)>& extra) {
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
  if (!int8.empty()) {
    std::vector<std::string> names;
    for (const auto& w : int8) names.push_back(w.first);
    j["int8"] = names;
  }

  torch::serialize::OutputArchive archive;
  archive.write("parla_format", c10::IValue(kCheckpointFormat));
  archive.write("parla_meta", c10::IValue(j.dump()));
  archive.write("parla_src_spm", bytes_to_tensor(meta.src_spm), true);
  archive.write("parla_tgt_spm", bytes_to_tensor(meta.tgt_spm), true);
  torch::serialize::OutputArchive weights;
  model.save(weights);
  archive.write("model", weights);
  if (!int8.empty()) {
    torch::serialize::OutputArchive q;
    for (size_t i = 0; i < int8.size(); ++i) {
      q.write("values_" + std::to_string(i), int8[i].second->values);
      q.write("scales_" + std::to_string(i), int8[i].second->scales);
    }
    archive.write("int8", q);
  }
  if (extra) extra(archive);

  // Same folder, so the rename is atomic and never leaves a half-written checkpoint under `path`.
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    archive.save_to(tmp);
  } catch (const std::exception& e) {
    std::remove(tmp.c_str());
    throw IoError(path + ": cannot write checkpoint (" + brief_reason(e) + ")");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw IoError(path + ": cannot rename the temporary checkpoint into place");
  }
}

ModelMeta read_meta(const std::string& path) {
  torch::serialize::InputArchive archive;
  ModelMeta meta;
  open_archive(path, archive, meta, torch::kCPU);
  return meta;
}

void load_weights(const std::string& path, torch::nn::Module& model,
                  const std::function<void(torch::serialize::InputArchive&)>& extra) {
  torch::serialize::InputArchive archive;
  ModelMeta meta;
  const auto params = model.parameters(true);
  open_archive(path, archive, meta, params.empty() ? torch::Device(torch::kCPU) : params.front().device());
  require_float_checkpoint(meta, path, "loading weights into a model for training");
  load_module(path, archive, model);
  if (extra) extra(archive);
}

LoadedSeq2Seq load_seq2seq(const std::string& path, const torch::Device& device) {
  torch::serialize::InputArchive archive;
  LoadedSeq2Seq out;
  open_archive(path, archive, out.meta, device);
  if (!out.meta.config.is_object() || !out.meta.config.contains("model"))
    throw DataError(path + ": checkpoint metadata has no 'model' config section");
  if (out.meta.src_vocab_size < 1 || out.meta.tgt_vocab_size < 1)
    throw DataError(path + ": checkpoint metadata has no vocabulary sizes");
  ModelConfig cfg;
  try {
    config::ConfigBuilder builder;
    builder.merge(nlohmann::json{{"model", out.meta.config["model"]}}, "checkpoint " + path);
    cfg = builder.build().model;
    out.model = build_seq2seq(cfg, out.meta.src_vocab_size, out.meta.tgt_vocab_size);
  } catch (const ConfigError& e) {
    throw DataError(path + ": the model config stored in the checkpoint is not usable: " + e.what());
  }
  if (!out.meta.int8.empty()) {
    if (!device.is_cpu())
      throw ConfigError("runtime.device: " + path + " is an int8 checkpoint, which decodes on the CPU only");
    load_int8(path, archive, *out.model, out.meta.int8);
  }
  out.model->to(device);  // before loading, so the weights are copied device to device
  load_module(path, archive, *out.model, out.meta.int8);
  out.model->eval();
  return out;
}

}  // namespace parla::models

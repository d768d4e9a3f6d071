#pragma once
// Checkpoints as parla wrote them before issue 35 (format 1): a TorchScript module archive written with
// torch::serialize::OutputArchive, with the layout of the old models::save_checkpoint and trainer (the code below
// is theirs): "model" nests module by module (Module::save), the optimizer goes through LibTorch's own serializer
// (state keyed by TensorImpl addresses), the trainer's strings are string attributes and its sub-archives nest.
// Tests use it to produce the old files that users still hold, from the content of a format-2 checkpoint, so that
// the strict reader is checked against what LibTorch itself writes.
#include <memory>
#include <string>

#include <torch/torch.h>

#include "models/checkpoint.h"
#include "models/int8_quantization.h"
#include "models/tensor_archive.h"
#include "train/optimizer_state.h"

namespace parla::testing {

inline torch::Tensor legacy_bytes_tensor(const std::string& s) {
  auto t = torch::empty({static_cast<int64_t>(s.size())}, torch::kUInt8);
  if (!s.empty()) std::memcpy(t.data_ptr<uint8_t>(), s.data(), s.size());
  return t;
}

// Writes `to` in format 1 with everything the format-2 checkpoint `from` holds.
inline void write_legacy_checkpoint(const std::string& from, const std::string& to) {
  const auto archive = models::TensorArchive::load(from);
  const auto meta = models::read_meta(from);
  nlohmann::json j;
  j["config"] = meta.config;
  j["info"] = meta.info;
  j["src_vocab_size"] = meta.src_vocab_size;
  j["tgt_vocab_size"] = meta.tgt_vocab_size;
  if (!meta.int8.empty()) j["int8"] = meta.int8;

  torch::serialize::OutputArchive root;
  root.write("parla_format", c10::IValue(int64_t{1}));
  root.write("parla_meta", c10::IValue(j.dump()));
  root.write("parla_src_spm", legacy_bytes_tensor(meta.src_spm), true);
  root.write("parla_tgt_spm", legacy_bytes_tensor(meta.tgt_spm), true);

  std::shared_ptr<torch::nn::Module> model;
  if (!meta.int8.empty()) {
    auto loaded = models::load_seq2seq(from);
    model = loaded.model;
    torch::serialize::OutputArchive weights;
    model->save(weights);  // int8 weights are one-element placeholders here, as they were
    root.write("model", weights);
    torch::serialize::OutputArchive q;
    auto int8 = models::int8_weights(*loaded.model);
    for (size_t i = 0; i < int8.size(); ++i) {
      q.write("values_" + std::to_string(i), int8[i].second->codes());
      q.write("scales_" + std::to_string(i), int8[i].second->scales);
    }
    root.write("int8", q);
    root.save_to(to);
    return;
  }
  model = models::build_saved_model(from, meta);
  std::vector<std::string> names;
  for (const auto& p : model->named_parameters()) names.push_back(p.key());
  std::unique_ptr<torch::optim::AdamW> optimizer;
  models::load_weights(from, *model, [&](const models::TensorArchive& a) {
    optimizer = std::make_unique<torch::optim::AdamW>(model->parameters(), torch::optim::AdamWOptions());
    if (!train::load_optimizer_state(a, *optimizer, names)) optimizer.reset();
  });
  torch::serialize::OutputArchive weights;
  model->save(weights);
  root.write("model", weights);
  if (optimizer) {
    torch::serialize::OutputArchive opt;
    optimizer->save(opt);
    root.write("optimizer", opt);
  }
  if (const std::string* s = archive.read_string("training_state")) root.write("training_state", c10::IValue(*s));
  torch::Tensor t;
  if (archive.try_read("torch_rng", t)) root.write("torch_rng", t);
  if (archive.try_read("torch_cuda_rng", t)) root.write("torch_cuda_rng", t);
  if (archive.read_string("training_state")) {  // the old trainer always wrote the task's sub-archive
    torch::serialize::OutputArchive task;
    if (const std::string* s = archive.read_string("task_state.masking_rng"))
      task.write("masking_rng", c10::IValue(*s));
    root.write("task_state", task);
  }
  if (const std::string* s = archive.read_string("loss_scaler")) root.write("loss_scaler", c10::IValue(*s));
  const auto ema = archive.tensor_names("weight_ema.");
  if (!ema.empty()) {
    torch::serialize::OutputArchive a;
    for (const auto& name : ema) {
      archive.try_read(name, t);
      a.write(name.substr(std::string("weight_ema.").size()), t.clone(), /*is_buffer=*/true);
    }
    root.write("weight_ema", a);
  }
  root.save_to(to);
}

}  // namespace parla::testing

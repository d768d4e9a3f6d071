#include "train/checkpoint_upgrade.h"

#include <memory>

#include <torch/torch.h>

#include "models/checkpoint.h"
#include "train/optimizer_state.h"

namespace parla::train {

namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Entries that save_checkpoint and save_optimizer_state write themselves, from the model and the optimizer.
bool rewritten(const std::string& name) {
  return name == "format" || name == "parla_format" || name == "parla_meta" || name == "parla_src_spm" ||
         name == "parla_tgt_spm" || starts_with(name, "model.") || starts_with(name, "int8.") ||
         starts_with(name, "optimizer.");
}

}  // namespace

int upgrade_checkpoint(const std::string& in, const std::string& out) {
  // One archive of the file at a time: each holds the file's index (a hostile header of a million entries makes
  // that the peak), so this one goes before read_meta loads its own, and the extras are read at the end.
  const int format = models::TensorArchive::load(in).legacy() ? 1 : 2;
  const models::ModelMeta meta = models::read_meta(in);
  if (!meta.int8.empty()) {  // decodes only: no trainer state to carry
    auto loaded = models::load_seq2seq(in);
    models::save_checkpoint(out, *loaded.model, loaded.meta);
    return format;
  }
  auto model = models::build_saved_model(in, meta);
  std::vector<std::string> names;
  for (const auto& p : model->named_parameters()) names.push_back(p.key());
  std::unique_ptr<torch::optim::AdamW> optimizer;
  models::load_weights(in, *model, [&](const models::TensorArchive& a) {
    optimizer = std::make_unique<torch::optim::AdamW>(model->parameters(), torch::optim::AdamWOptions());
    if (!load_optimizer_state(a, *optimizer, names)) optimizer.reset();
  });
  models::save_checkpoint(out, *model, meta, [&](models::TensorArchive& o) {
    if (optimizer) save_optimizer_state(*optimizer, names, o);
    const auto archive = models::TensorArchive::load(in);
    for (const auto& name : archive.string_names())
      if (!rewritten(name)) o.write(name, *archive.read_string(name));
    for (const auto& name : archive.tensor_names()) {
      torch::Tensor t;
      if (!rewritten(name) && archive.try_read(name, t)) o.write(name, t);
    }
    archive.check_unchanged();
  });
  return format;
}

}  // namespace parla::train

#include "convert/imported_model.h"

#include <set>

#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "models/checkpoint.h"
#include "models/factory.h"

namespace parla::convert {

std::vector<int64_t> parla_order(int64_t size, int64_t pad, int64_t unk, int64_t eos, const std::string& what,
                                 int64_t bos) {
  for (int64_t id : {pad, unk, eos})
    if (id < 0 || id >= size)
      throw DataError(what + ": special id " + std::to_string(id) + " is outside the vocabulary of " +
                      std::to_string(size));
  if (pad == unk || pad == eos || unk == eos || (bos >= 0 && (bos == pad || bos == unk || bos == eos || bos >= size)))
    throw DataError(what + ": pad, unk, eos (and bos) must be different ids within the vocabulary (pad " +
                    std::to_string(pad) + ", unk " + std::to_string(unk) + ", eos " + std::to_string(eos) + ", bos " +
                    std::to_string(bos) + ")");
  if (size < 4) throw DataError(what + ": a vocabulary of " + std::to_string(size) + " has no ordinary piece");
  std::vector<int64_t> rest;
  for (int64_t id = 0; id < size; ++id)
    if (id != pad && id != unk && id != eos && id != bos) rest.push_back(id);
  if (bos < 0) {
    bos = rest.front();
    rest.erase(rest.begin());
  }
  std::vector<int64_t> order = {pad, unk, bos, eos};
  order.insert(order.end(), rest.begin(), rest.end());
  return order;
}

void write_checkpoint(ImportedModel m, const std::string& source, const std::string& path) {
  Config c;
  c.model = m.model;
  const int64_t src_vocab = static_cast<int64_t>(m.src_pieces.size()), tgt_vocab = static_cast<int64_t>(m.tgt_pieces.size());
  std::shared_ptr<models::Seq2SeqModel> model;
  try {
    model = models::build_seq2seq(m.model, src_vocab, tgt_vocab);
  } catch (const ConfigError& e) {
    throw DataError(source + ": the model it describes cannot be built: " + e.what());
  }
  std::set<std::string> used;
  torch::NoGradGuard no_grad;
  for (auto& p : model->named_parameters(true)) {
    auto it = m.weights.find(p.key());
    if (it == m.weights.end()) throw DataError(source + ": no weight for parla's '" + p.key() + "'");
    if (it->second.sizes() != p.value().sizes())
      throw DataError(source + ": the weight for '" + p.key() + "' has shape " + c10::str(it->second.sizes()) +
                      ", the model's config needs " + c10::str(p.value().sizes()));
    p.value().copy_(it->second);
    it->second = torch::Tensor();  // the model's copy is the one kept
    used.insert(p.key());
  }
  for (const auto& [name, t] : m.weights)
    if (!used.count(name)) throw DataError(source + ": weight '" + name + "' has no place in the model");
  models::ModelMeta meta;
  meta.config = config::to_json(c);
  meta.src_spm = m.src_spm;
  meta.tgt_spm = m.tgt_spm;
  meta.src_pieces = m.src_pieces;
  meta.tgt_pieces = m.tgt_pieces;
  meta.control_pieces = m.control_pieces;
  meta.languages = m.languages;
  meta.info = m.info;
  // The vocabularies must load with their tables before anything is written.
  models::source_vocab(meta, source);
  models::target_vocab(meta, source);
  models::save_checkpoint(path, *model, meta);
}

}  // namespace parla::convert

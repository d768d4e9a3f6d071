#pragma once
// What an importer produces before it becomes a parla checkpoint: the model config, the weights under parla's
// parameter names, the vocabularies (SentencePiece models plus the piece of each id) and the provenance. Importers
// (marian_import.h, hf_marian_import.h) fill it; write_checkpoint builds the model from the config, checks that
// the weights fill every parameter with its shape and nothing else, and saves an ordinary checkpoint.
//
// Vocabularies are remapped on import so that parla's fixed ids hold the source's specials: 0 its pad, 1 its
// unk, 3 its eos, 2 its bos if it starts decoding from one (a MarianMT folder parla exported), else its first
// ordinary piece (Marian has no bos: its decoder starts from pad, which model.decoder_start says); the remaining
// pieces follow in the source's order. Embedding rows, the output
// projection and the logit bias are permuted alike, so the model computes exactly what the original did.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "core/config/model_config.h"

namespace parla::convert {

struct ImportedModel {
  ModelConfig model;
  std::map<std::string, torch::Tensor> weights;  // parla names (model.named_parameters() keys)
  std::string src_spm, tgt_spm;                  // serialized SentencePiece models
  std::vector<std::string> src_pieces, tgt_pieces;
  std::vector<std::string> control_pieces;               // models::ModelMeta::control_pieces
  nlohmann::json languages = nlohmann::json::object();  // models::ModelMeta::languages
  nlohmann::json info;  // "imported_from", the source's own settings worth keeping
};

// The order in which a vocabulary of `size` ids becomes parla's: result[parla id] = source id: pad, unk, then bos
// (or, without one, bos < 0, the first ordinary piece), eos, and the rest in order. DataError (naming `what`) when
// the specials are out of range or coincide.
std::vector<int64_t> parla_order(int64_t size, int64_t pad, int64_t unk, int64_t eos, const std::string& what,
                                 int64_t bos = -1);

// Builds the model, fills it, saves it at `path` (atomically). DataError naming `source` (the imported folder)
// when a weight is missing, has another shape, or is left over. Each imported weight is freed once the model holds
// it, so that the peak holds the weights about once (NLLB-600M: 2.4 GB), not twice.
void write_checkpoint(ImportedModel m, const std::string& source, const std::string& path);

}  // namespace parla::convert

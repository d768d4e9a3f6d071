#pragma once
// What every Hugging Face model folder parla imports shares: vocab.json (piece -> id), and the weights, from
// model.safetensors or, where a folder has only pytorch_model.bin in torch.save's zip format, through the strict
// pickle reader (formats/torchscript_archive.h: only tensors, storages and plain containers, nothing is called).
// The legacy torch.save format (a bare pickle) is refused with the command that re-saves the folder.
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "convert/imported_model.h"
#include "formats/json_file.h"
#include "models/tensor_archive.h"

namespace parla::convert {

// vocab.json: piece -> id, which must number 0 .. n-1 once each. Returns the piece of each id. DataError naming
// the file otherwise.
std::vector<std::string> read_hf_vocab(const std::string& path);

// The id of `piece` in `pieces`; DataError naming `path` when it has none.
int64_t hf_piece_id(const std::vector<std::string>& pieces, const std::string& piece, const std::string& path);

// The weights of the folder `dir`, read by name with their shapes checked; `model_class` names the transformers
// class in the re-save command of the legacy-format message.
class HfWeights {
 public:
  HfWeights(const std::string& dir, const std::string& model_class);

  const std::string& path() const { return path_; }
  bool has(const std::string& name) const { return archive_.contains(name); }
  // The shape of tensor `name` as the file declares it (nothing copied). DataError naming the file when absent.
  std::vector<int64_t> shape(const std::string& name) const;
  // A float copy of tensor `name` with the given shape. DataError naming the file otherwise.
  torch::Tensor get(const std::string& name, std::vector<int64_t> shape);
  void ignore(const std::string& name) { used_.insert(name); }
  // Every tensor of the file was used: anything left is something parla would silently drop. `what` names the
  // architecture in the message.
  void check_all_used(const std::string& what) const;

 private:
  std::string path_;
  models::TensorArchive archive_;
  std::set<std::string> used_;
};

// The sizes and settings every BART-family config.json (MarianMT, M2M-100) gives the same way: d_model, heads,
// ffn, layers, activation (`default_activation` where absent), scale_embedding, max_position_embeddings, dropouts,
// tie_word_embeddings, for a Transformer. DataError naming `config_path` and the key for what parla cannot hold
// (two head counts, two ffn widths, another activation). The importer sets the rest (norm, positions, start).
ModelConfig read_bart_config(const formats::JsonFields& c, const std::string& config_path,
                             const std::string& default_activation);

// Exporting: what read_bart_config reads, written back for `cfg` (the architecture-specific keys are the caller's).
nlohmann::json bart_config_json(const ModelConfig& cfg, int64_t max_positions);

// The encoder and decoder layers of a BART-family folder (MarianMT, M2M-100: the same weight names,
// convert/hf_marian_layout.h) into m.weights under parla's names, sized by m.model.
void read_hf_layers(HfWeights& w, ImportedModel& m);

}  // namespace parla::convert

#pragma once
// Where each weight of a Transformer layer lives in a Hugging Face MarianMT model and in parla's, one table for
// import and export, so the two directions cannot disagree. parla stacks the Q, K and V projections of an
// attention into one matrix (rows Q; K; V) where MarianMT keeps three.
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/config/model_config.h"
#include "models/tensor_archive.h"

namespace parla::convert {

struct LayerWeight {
  enum Kind {
    kReadsResidual,   // a linear layer whose input is the residual stream (columns indexed by d_model)
    kWritesResidual,  // a linear layer whose output is the residual stream (rows indexed by d_model)
    kNorm,            // a layer norm over the residual stream (weight and bias)
    kStacked,         // parla's stacked projection (rows `parts`, each d_model x d_model) of MarianMT's *_proj
  };
  Kind kind;
  std::string hf, parla;           // names within the layer, without ".weight" / ".bias"
  bool inner = false;              // reads or writes the feed-forward's inner width (ffn_dim) instead of d_model
  std::vector<std::string> parts = {};  // kStacked: MarianMT's projections, "q", "k", "v", under hf + "." + p + "_proj"
};

// The weights of one encoder (decoder = false) or decoder layer, in order.
const std::vector<LayerWeight>& hf_marian_layer(bool decoder);

// Exporting: every encoder and decoder layer of a parla Transformer (`params`: its named parameters) into `st`
// under Hugging Face's names (model.encoder.layers.N. ...), as float32, the residual stream's dimensions permuted
// by `order` (new dimension k is old dimension order[k]; arange(d_model) for none).
void write_hf_layers(models::TensorArchive& st, const torch::OrderedDict<std::string, torch::Tensor>& params,
                     const ModelConfig& cfg, const torch::Tensor& order);

}  // namespace parla::convert

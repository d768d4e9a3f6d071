#pragma once
// Model-level checkpoints: one file holding the weights, the effective config the model was built from, the
// SentencePiece models (so a checkpoint is self-contained) and free-form info; the trainer adds its own
// archives (optimizer, scheduler, RNG) through `extra`.
//
// File layout (a torch::serialize archive):
//   parla_format   int, kCheckpointFormat
//   parla_meta     string, JSON {"config", "info", "src_vocab_size", "tgt_vocab_size"}
//   parla_src_spm, parla_tgt_spm   uint8 tensors with the serialized SentencePiece protos (may be empty)
//   model          sub-archive of the module's parameters and buffers (torch::nn::Module::save)
//   int8           only in an int8 checkpoint (parla-train quantize): values_<i> (int8 [n, k]) and scales_<i>
//                  (float [n]) of the weight named parla_meta's "int8"[i]; "model" then holds a one-element
//                  placeholder for that weight. Plain tensors, so both LibTorch builds read it.
//   ...            whatever `extra` writes
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "models/seq2seq.h"

namespace parla::models {

inline constexpr int64_t kCheckpointFormat = 1;

struct ModelMeta {
  nlohmann::json config;         // the effective config (parla::config::to_json) the model was built from
  std::string src_spm, tgt_spm;  // serialized SentencePiece model protos (empty if not known)
  nlohmann::json info;           // free-form: step, epoch, validation scores, ...
  // Vocabulary sizes the model was built with (needed to rebuild it). save_checkpoint fills them from the
  // model when it is a parla Seq2SeqModel or BertModel, so callers need not set them.
  int64_t src_vocab_size = 0, tgt_vocab_size = 0;
  // Parameter names stored in int8 (models/int8_quantization.h); empty for a float checkpoint.
  std::vector<std::string> int8;
};

// DataError naming the file when `meta` is an int8 checkpoint: such a file decodes, but cannot be trained,
// averaged or used to initialise a model. `use` names what was asked of it ("--resume", "average", ...).
void require_float_checkpoint(const ModelMeta& meta, const std::string& path, const std::string& use);

// Writes atomically (a model with int8 weights is written as an int8 checkpoint) (temp file in the same folder, then rename). `extra` may be empty. Throws IoError when the
// file cannot be written.
void save_checkpoint(const std::string& path, torch::nn::Module& model, const ModelMeta& meta,
                     const std::function<void(torch::serialize::OutputArchive&)>& extra = {});

struct LoadedSeq2Seq {
  std::shared_ptr<Seq2SeqModel> model;  // in eval mode
  ModelMeta meta;
};

// Checkpoints load on any device, whichever one wrote them: archives are read with a map location, so a file
// written on cuda:3 opens on a CPU-only machine.

// An int8 checkpoint loads with its int8 weights in place (CPU only: ConfigError naming runtime.device otherwise).
// Rebuilds the model from meta.config["model"] and the stored vocabulary sizes via the factory, loads its
// weights and puts it on `device`. DataError naming the file for a missing, corrupt or non-parla file, or a
// config/weight mismatch.
LoadedSeq2Seq load_seq2seq(const std::string& path, const torch::Device& device = torch::kCPU);
// The metadata only (tensors are mapped to the CPU).
ModelMeta read_meta(const std::string& path);
// Loads weights into an existing model (every parameter and buffer must be present with the same shape), then
// lets `extra` read the trainer's archives. Refuses an int8 checkpoint (require_float_checkpoint). The archive is mapped onto the device of the model's first parameter
// (CPU for a model without parameters), so what `extra` reads (optimizer moments) lands beside the weights.
void load_weights(const std::string& path, torch::nn::Module& model,
                  const std::function<void(torch::serialize::InputArchive&)>& extra = {});

}  // namespace parla::models

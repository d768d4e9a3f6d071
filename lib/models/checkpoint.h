#pragma once
// Model-level checkpoints: one file holding the weights, the effective config the model was built from, the
// SentencePiece models (so a checkpoint is self-contained) and free-form info; the trainer adds its own entries
// (optimizer, training state, RNG) through `extra`.
//
// Format 2 (written since issue 35): a safetensors file (models/tensor_archive.h), which holds data only and is
// readable by any safetensors reader (Python's `safetensors`, Rust's, Hugging Face's tools):
//   __metadata__   "format": "pt", "parla_format": "2", "parla_meta": JSON {"config", "info", "src_vocab_size",
//                  "tgt_vocab_size", "int8"}, and the trainer's strings ("training_state", ...)
//   parla_src_spm, parla_tgt_spm   U8 tensors with the serialized SentencePiece protos (may be empty)
//   parla_src_pieces, parla_tgt_pieces   metadata, only in imported models: JSON arrays, the piece of each id when
//                  the ids are not the SentencePiece model's own (text/sentencepiece_vocab.h)
//   model.<name>   every parameter and buffer of the module, under its LibTorch name
//   int8.<name>.values, int8.<name>.scales   only in an int8 checkpoint (parla-train quantize): the int8 weights
//                  (I8 [n, k]) and their per-row scales (F32 [n]) of the weights listed in parla_meta's "int8",
//                  which then have no model.<name> entry
//   ...            whatever `extra` writes
// Format 1 (parla before issue 35): a TorchScript module archive with the same names nested as sub-archives. It
// is still read, by a strict reader that runs none of its code (formats/torchscript_archive.h), and never
// written; `parla-train upgrade` rewrites one as format 2.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include "core/config/model_config.h"
#include "models/seq2seq.h"
#include "models/tensor_archive.h"
#include "text/sentencepiece_vocab.h"

namespace parla::models {

inline constexpr int64_t kCheckpointFormat = 2;
inline constexpr int64_t kLegacyCheckpointFormat = 1;

struct ModelMeta {
  nlohmann::json config;         // the effective config (parla::config::to_json) the model was built from
  std::string src_spm, tgt_spm;  // serialized SentencePiece model protos (empty if not known)
  // The piece of each id, when the ids are not the SentencePiece models' own (imported models); empty otherwise.
  std::vector<std::string> src_pieces, tgt_pieces;
  nlohmann::json info;           // free-form: step, epoch, validation scores, ...
  // Vocabulary sizes the model was built with (needed to rebuild it). save_checkpoint fills them from the
  // model when it is a parla Seq2SeqModel or BertModel, so callers need not set them.
  int64_t src_vocab_size = 0, tgt_vocab_size = 0;
  // Parameter names stored in int8 (models/int8_quantization.h); empty for a float checkpoint.
  std::vector<std::string> int8;
  // Pieces of the tables that are tokens of the model rather than text (imported M2M-100 and NLLB models: language
  // codes, <mask>): never produced from text, skipped when printing (text::SentencePieceVocab's controls).
  std::vector<std::string> control_pieces;
  // A multilingual model's languages (imported M2M-100 and NLLB models): {"codes": {code: piece}, "source": code,
  // "target": code}, the codes as the model's own tokenizer names them and the defaults it was saved with; the
  // source's language token goes before its pieces, the target's is forced first (decode/language_codes.h).
  nlohmann::json languages = nlohmann::json::object();
};

// The vocabularies a checkpoint's model reads and writes: its SentencePiece models, numbered by its piece tables
// when it has them. DataError naming `path` when they do not load.
text::SentencePieceVocab source_vocab(const ModelMeta& meta, const std::string& path);
text::SentencePieceVocab target_vocab(const ModelMeta& meta, const std::string& path);
// Both, the target the source's own object when the two sides are the same model and piece table (OPUS-MT's and
// any joint vocabulary: building a SentencePiece model of 58k pieces costs about 0.1 s).
std::pair<text::SentencePieceVocab, text::SentencePieceVocab> vocabularies(const ModelMeta& meta,
                                                                         const std::string& path);

// DataError naming the file when `meta` is an int8 checkpoint: such a file decodes, but cannot be trained,
// averaged or used to initialise a model. `use` names what was asked of it ("--resume", "average", ...).
void require_float_checkpoint(const ModelMeta& meta, const std::string& path, const std::string& use);

// The model section the checkpoint at `path` was built with, read as a config (ConfigError naming the key and
// "checkpoint PATH" for a value this version does not accept).
ModelConfig model_config(const ModelMeta& meta, const std::string& path);

// Writes atomically (temp file in the same folder, then rename; a model with int8 weights is written as an int8
// checkpoint). `extra` may be empty. Throws IoError when the file cannot be written.
void save_checkpoint(const std::string& path, torch::nn::Module& model, const ModelMeta& meta,
                     const std::function<void(TensorArchive&)>& extra = {});

struct LoadedSeq2Seq {
  std::shared_ptr<Seq2SeqModel> model;  // in eval mode
  ModelMeta meta;
};

// Checkpoints load on any device, whichever one wrote them: tensors are read on the CPU and copied where the model
// lives, so a file written on cuda:3 opens on a CPU-only machine.

// An int8 checkpoint loads with its int8 weights in place (CPU only: ConfigError naming runtime.device otherwise).
// Rebuilds the model from meta.config["model"] and the stored vocabulary sizes via the factory (within a memory
// budget set by the file's size: build_within_file_budget), loads its weights and puts it on `device`. DataError
// naming the file for a missing, corrupt or non-parla file, or a config/weight mismatch. `on_meta`, when given, sees
// the metadata as soon as it is read, before the model is built (a caller can start on the vocabularies meanwhile);
// what it throws leaves load_seq2seq. `int8` (CPU only): a float checkpoint's weights are quantized as they are
// read (models/int8_quantization.h), each straight from the file, so the float model never exists whole in memory;
// the result is quantize_int8's after a float load.
LoadedSeq2Seq load_seq2seq(const std::string& path, const torch::Device& device = torch::kCPU,
                           const std::function<void(const ModelMeta&)>& on_meta = {}, bool int8 = false);
// The metadata only.
ModelMeta read_meta(const std::string& path);
// Loads weights into an existing model (every parameter and buffer must be present with the same shape), then
// lets `extra` read the trainer's entries, whose tensors come back on the device of the model's first parameter
// (the CPU for a model without parameters). Refuses an int8 checkpoint (require_float_checkpoint).
void load_weights(const std::string& path, torch::nn::Module& model,
                  const std::function<void(const TensorArchive&)>& extra = {});

// Rebuilds the module a checkpoint was saved from (a Seq2SeqModel, or a BertModel for model.type "bert") through
// the factory, from its stored config and vocabulary sizes, within build_within_file_budget; untrained weights.
// DataError naming the file when the stored config is missing or unusable.
std::shared_ptr<torch::nn::Module> build_saved_model(const std::string& path, const ModelMeta& meta);

// Runs `build`, which constructs a model from a config read out of checkpoint `path`, with LibTorch's CPU
// allocations on this thread capped at four times the file's size plus 256 MiB (models/allocation_budget.h): a
// config that describes a model far larger than the weights the file holds is refused with a DataError naming
// the file, before its memory is allocated. `overhead_bytes` (module_overhead_bytes of the config) is what the
// modules take beyond their tensors: counted against the same cap, and refused before anything is built.
void build_within_file_budget(const std::string& path, const std::function<void()>& build,
                              uint64_t overhead_bytes);

}  // namespace parla::models

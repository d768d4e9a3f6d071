#pragma once
// Fine-tuning (training.init_from): a new run starts from a whole translation checkpoint, e.g. an OPUS-MT model
// parla-convert imported. It keeps the checkpoint's architecture (its model section) and its vocabularies (the
// dataset must be encoded with them: parla-preprocess --vocab-from), and starts the optimizer, the schedule and
// the step count afresh; --resume is what continues a run.
#include <string>

#include "core/config.h"
#include "data/token_dataset.h"
#include "models/checkpoint.h"

namespace parla::train {

// The model keys that describe training rather than the network: a fine-tuning run may set its own.
bool is_training_only_model_key(const std::string& key);

// The effective config of a run: builder.build(), and when training.init_from names a checkpoint, its model
// section in place of the config's, with the training-only keys the user gave. ConfigError naming the key when the
// user gave another model key with a value the checkpoint does not have (the weights would not fit, or would mean
// something else); DataError naming the file when it cannot be read.
Config fine_tuning_config(const config::ConfigBuilder& builder);

// Refuses (ConfigError naming the file, the dataset and what differs) a start from checkpoint `path` unless it is a
// float translation checkpoint whose architecture is `cfg`'s (training-only keys aside) and whose SentencePiece
// models (`src_spm`, `tgt_spm`: the dataset's model files' bytes, as the trainer read them) and piece tables are
// the ones `info`'s dataset was encoded with.
void check_fine_tuning_start(const models::ModelMeta& meta, const std::string& path, const Config& cfg,
                             const data::DatasetInfo& info, const std::string& src_spm, const std::string& tgt_spm);

}  // namespace parla::train

#include "train/fine_tuning.h"

#include <algorithm>

#include "core/error.h"

namespace parla::train {

namespace {

const std::vector<std::string> kTrainingOnly = {"dropout", "attention_dropout", "activation_dropout",
                                                "source_word_dropout", "target_word_dropout"};

}  // namespace

bool is_training_only_model_key(const std::string& key) {
  return std::find(kTrainingOnly.begin(), kTrainingOnly.end(), key) != kTrainingOnly.end();
}

Config fine_tuning_config(const config::ConfigBuilder& builder) {
  Config cfg = builder.build();
  const std::string path = cfg.training.init_from;
  if (path.empty()) return cfg;
  const auto meta = models::read_meta(path);
  if (!meta.config.contains("model") || !meta.config["model"].is_object())
    throw DataError(path + ": has no model config; is it a parla checkpoint?");
  const auto theirs = meta.config["model"];
  const auto mine = config::to_json(cfg)["model"];
  config::ConfigBuilder model;
  model.merge(nlohmann::json{{"model", theirs}}, "checkpoint '" + path + "' (training.init_from)");
  for (auto it = mine.begin(); it != mine.end(); ++it) {
    const std::string key = it.key();
    if (!builder.given("model." + key)) continue;
    if (is_training_only_model_key(key)) {
      model.set("model." + key, it.value(), "your config");
    } else if (!theirs.contains(key) || theirs[key] != it.value()) {
      throw ConfigError("key 'model." + key + "' is " + it.value().dump() + ", but training.init_from '" + path +
                        "' was built with " + (theirs.contains(key) ? theirs[key].dump() : std::string("its default")) +
                        ": a fine-tuning run takes the checkpoint's architecture (leave model." + key +
                        " out; only the dropout keys may change)");
    }
  }
  cfg.model = model.build().model;
  return cfg;
}

void check_fine_tuning_start(const models::ModelMeta& meta, const std::string& path, const Config& cfg,
                             const data::DatasetInfo& info, const std::string& src_spm, const std::string& tgt_spm) {
  models::require_float_checkpoint(meta, path, "training.init_from");
  const std::string type = meta.config.value("/model/type"_json_pointer, std::string("transformer"));
  if (type == "bert")
    throw ConfigError("training.init_from: '" + path + "' is a BERT checkpoint; training.init_encoder_from takes "
                      "its encoder");
  const auto theirs = meta.config.value("model", nlohmann::json::object());
  const auto mine = config::to_json(cfg)["model"];
  std::string diffs;
  for (auto it = mine.begin(); it != mine.end(); ++it)
    if (!is_training_only_model_key(it.key()) && theirs.contains(it.key()) && theirs[it.key()] != it.value())
      diffs += "\n  model." + it.key() + " (checkpoint " + theirs[it.key()].dump() + ", config " + it.value().dump() + ")";
  if (!diffs.empty())
    throw ConfigError("training.init_from '" + path + "': the model config differs (a fine-tuning run keeps the "
                      "checkpoint's architecture):" + diffs);
  // The dataset's ids must mean what the checkpoint's embeddings were trained on.
  const bool same = src_spm == meta.src_spm && tgt_spm == meta.tgt_spm && info.src_pieces == meta.src_pieces &&
                    info.tgt_pieces == meta.tgt_pieces && info.control_pieces == meta.control_pieces &&
                    info.languages.value("codes", nlohmann::json::object()) ==
                        meta.languages.value("codes", nlohmann::json::object());
  if (!same)
    throw ConfigError("training.init_from '" + path + "': dataset '" + info.dir + "' was not encoded with the "
                      "checkpoint's vocabularies; run parla-preprocess with --vocab-from " + path);
}

}  // namespace parla::train

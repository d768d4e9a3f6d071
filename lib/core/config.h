#pragma once
// The one JSON config shared by all four executables: sections `data` (with `data.clean`), `vocab`, `model`,
// `training`, `decoding`, `runtime`, `serve`. Each executable reads the sections it needs from the same file.
// Precedence: defaults (in the section structs) < config file < --set overrides and app flags.
#include <set>
#include <string>
#include <vector>

#include "core/config/data_config.h"
#include "core/config/decoding_config.h"
#include "core/config/model_config.h"
#include "core/config/runtime_config.h"
#include "core/config/serve_config.h"
#include "core/config/schema.h"
#include "core/config/training_config.h"
#include "core/config/vocab_config.h"

namespace parla {

struct Config {
  DataConfig data;
  VocabConfig vocab;
  ModelConfig model;
  TrainingConfig training;
  DecodingConfig decoding;
  RuntimeConfig runtime;
  ServeConfig serve;
};

namespace config {

// Builds the effective config of one run from its sources, validating each value as it arrives, so that
// every error names the key and where it came from before any work starts.
class ConfigBuilder {
 public:
  // Merges a JSON config file. Throws ConfigError (unreadable file, bad JSON, unknown key, wrong type, range).
  void load_file(const std::string& path);
  // Merges a JSON object of sections; `origin` names it in errors ("checkpoint model.pt").
  void merge(const json& j, const std::string& origin);
  // Sets one dotted key ("training.lr").
  void set(const std::string& key, const json& value, const std::string& origin);
  // Applies "--set training.lr=0.0007": the value is parsed as JSON when it is valid JSON, else taken as a string.
  void set_assignment(const std::string& assignment);

  // True when the key was given by the file, an override or an app flag (not just defaulted).
  bool given(const std::string& key) const { return given_.count(key) > 0; }
  // Throws ConfigError "missing required key" naming the key, the config file and `hint` (e.g. a flag).
  void require(const std::string& key, const std::string& hint = "") const;
  const std::string& file() const { return file_; }

  // The effective config, after each section's finalize hook (presets, cross-key checks).
  Config build() const;

 private:
  Config config_;
  std::set<std::string> given_;
  std::string file_;
};

// The effective config as JSON (every key, defaults included): --dump-config, checkpoints, meta.json.
json to_json(const Config& c);
// The keys of one section ("decoding", "data.clean"); empty for an unknown section.
std::vector<KeyInfo> section_keys(const std::string& section);
// Every dotted key, for suggestions and docs.
std::vector<std::string> all_keys();
// The Markdown reference of every section and key (docs/CONFIG.md is this text).
std::string reference_markdown();

}  // namespace config
}  // namespace parla

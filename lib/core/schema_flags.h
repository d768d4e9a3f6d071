#pragma once
// Command-line flags generated from the config schema. A key that declares names (SectionSchema::flag) becomes a
// CLI11 option of every app that exposes its section, with the key's doc, type, range and default as its help;
// a flag given on the command line sets its key with the flag as the origin, so a bad value is reported as
// "--beam-size: key 'decoding.beam_size': ...". One declaration, so --help, docs/CONFIG.md and the flags cannot
// drift apart; an app adds by hand only what is not a config key (-i, -o, -m).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/config.h"

namespace parla::app {

class SchemaFlags {
 public:
  // `exposed`: section names ("decoding", "runtime") or single dotted keys ("data.dir"). `extra_names` gives a
  // key app-specific names ahead of the schema's, e.g. {"data.dir", "-o,--output,--destdir"} in parla-preprocess.
  // An unknown section or key is a programming error (std::logic_error).
  SchemaFlags(CLI::App& cli, const std::vector<std::string>& exposed,
              const std::map<std::string, std::string>& extra_names = {});

  // After parsing: sets the key of every flag that was given, in declaration order.
  void apply(config::ConfigBuilder& builder) const;
  // The flag that set `key` ("--device") when one was given, else the key itself, for messages about its value.
  std::string origin(const std::string& key) const;
  // The keys that got an option, dotted.
  std::vector<std::string> keys() const;

  // The JSON value a flag's text stands for, given the key's type: numbers for int and float keys when the text
  // is one (else the text, which the schema then rejects naming the flag), the text itself for strings.
  static config::json value_of(const std::string& text, const std::string& type);

 private:
  struct Entry {
    std::string key, type, name;
    CLI::Option* option = nullptr;
    std::string text;
    std::vector<std::string> items;
    bool on = false;
  };
  std::vector<std::unique_ptr<Entry>> entries_;
};

}  // namespace parla::app

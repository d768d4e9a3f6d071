#pragma once
// The machinery behind parla's typed config: each section is a plain struct with commented default member
// initialisers (CTranslate2's shape), and a SectionSchema that declares every key once, with its documentation
// and constraint. From that one declaration come JSON reading with type and range checks, --dump-config,
// nearest-key suggestions for typos, and docs/CONFIG.md.
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config/choice.h"
#include "core/error.h"

namespace parla::config {

using json = nlohmann::json;

// Where a value came from, for error messages: "config.json" or "--set training.lr=abc".
struct Source {
  std::string origin;
};

// What a user sees of a key: in --help of docs, in errors.
struct KeyInfo {
  std::string key;         // "lr" (without the section)
  std::string type;        // "int", "float", "string", "bool", "list of strings", ...
  std::string constraint;  // "> 0", "one of: exp, floor", "" when anything of the type goes
  std::string doc;
  json default_value;
  // Command-line names in CLI11's spelling ("-b,--beam-size"), "" when the key is set only by a file or --set.
  // Apps generate their options from these (app::SchemaFlags), so a flag's help is this key's doc.
  std::string flags;
};

// Constraint on a value; numbers are checked against [min, max] (exclusive when the flag is set),
// strings against a list of choices.
struct Check {
  std::optional<double> min, max;
  bool min_exclusive = false;
  std::vector<std::string> choices;

  std::string describe() const;
};
Check at_least(double v);
Check greater_than(double v);
Check between(double lo, double hi);
Check one_of(std::vector<std::string> choices);

namespace detail {
// Reads a JSON value into T, throwing ConfigError naming `where` on a type mismatch.
void read_value(const json& j, int& out, const std::string& where);
void read_value(const json& j, int64_t& out, const std::string& where);
void read_value(const json& j, double& out, const std::string& where);
void read_value(const json& j, bool& out, const std::string& where);
void read_value(const json& j, std::string& out, const std::string& where);
void read_value(const json& j, std::vector<std::string>& out, const std::string& where);
void read_value(const json& j, std::vector<int>& out, const std::string& where);
void check_value(double v, const Check& c, const std::string& where);
void check_value(const std::string& v, const Check& c, const std::string& where);
template <class T>
void check_value(const T&, const Check&, const std::string&) {}

template <class T> const char* type_name();
template <> inline const char* type_name<int>() { return "int"; }
template <> inline const char* type_name<int64_t>() { return "int"; }
template <> inline const char* type_name<double>() { return "float"; }
template <> inline const char* type_name<bool>() { return "bool"; }
template <> inline const char* type_name<std::string>() { return "string"; }
template <> inline const char* type_name<std::vector<std::string>>() { return "list of strings"; }
template <> inline const char* type_name<std::vector<int>>() { return "list of ints"; }
}  // namespace detail

// The keys of one section (e.g. "training") of the struct S.
template <class S>
class SectionSchema {
 public:
  SectionSchema(std::string name, std::string doc) : name_(std::move(name)), doc_(std::move(doc)) {}

  template <class T>
  SectionSchema& add(const std::string& key, T S::*member, std::string doc, Check check = {}) {
    if constexpr (is_choice_v<T>) {
      return add_choice(key, member, std::move(doc), std::move(check));
    } else if constexpr (is_choice_list_v<T>) {
      return add_choice_list(key, member, std::move(doc), std::move(check));
    } else {
      return add_value(key, member, std::move(doc), std::move(check));
    }
  }

  // Gives the key added last its command-line names, e.g. .add("beam_size", ...).flag("-b,--beam-size").
  SectionSchema& flag(std::string names) {
    keys_.back().flags = std::move(names);
    return *this;
  }

  // Runs after every source is merged, with the keys of this section that were given explicitly: presets
  // fill in what the user did not set, cross-key checks throw ConfigError.
  SectionSchema& on_finalize(std::function<void(S&, const std::set<std::string>& given)> fn) {
    finalize_ = std::move(fn);
    return *this;
  }
  void finalize(S& s, const std::set<std::string>& given) const {
    if (finalize_) finalize_(s, given);
  }

  const std::string& name() const { return name_; }
  const std::string& doc() const { return doc_; }
  const std::vector<KeyInfo>& keys() const { return keys_; }

  // Sets one key; returns false if the section has no such key.
  bool set(S& s, const std::string& key, const json& value, const Source& src) const {
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (keys_[i].key == key) {
        readers_[i](s, value, src);
        return true;
      }
    }
    return false;
  }

  json to_json(const S& s) const {
    json out = json::object();
    for (const auto& w : writers_) w(s, out);
    return out;
  }

 private:
  template <class T>
  SectionSchema& add_value(const std::string& key, T S::*member, std::string doc, Check check) {
    S defaults{};
    keys_.push_back({key, detail::type_name<T>(), check.describe(), std::move(doc), json(defaults.*member), ""});
    std::string qualified = name_ + "." + key;
    readers_.push_back([member, check, qualified](S& s, const json& j, const Source& src) {
      std::string where = src.origin + ": key '" + qualified + "'";
      T value{};
      detail::read_value(j, value, where);
      if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
        detail::check_value(static_cast<double>(value), check, where);
      } else {
        detail::check_value(value, check, where);
      }
      s.*member = std::move(value);
    });
    writers_.push_back([member, key](const S& s, json& out) { out[key] = s.*member; });
    return *this;
  }

  // An enum key: a string in JSON, one of the enum's names (or of the subset `check` lists).
  template <class E>
  SectionSchema& add_choice(const std::string& key, E S::*member, std::string doc, Check check) {
    if (check.choices.empty()) check.choices = names_of<E>();
    S defaults{};
    keys_.push_back({key, "string", check.describe(), std::move(doc), json(name_of(defaults.*member)), ""});
    std::string qualified = name_ + "." + key;
    readers_.push_back([member, check, qualified](S& s, const json& j, const Source& src) {
      std::string where = src.origin + ": key '" + qualified + "'";
      std::string text;
      detail::read_value(j, text, where);
      detail::check_value(text, check, where);
      E value{};
      if (!parse_choice(text, value)) throw ConfigError(where + ": '" + text + "' is not a value of this key");
      s.*member = value;
    });
    writers_.push_back([member, key](const S& s, json& out) { out[key] = name_of(s.*member); });
    return *this;
  }

  // A list of enum values: a JSON list of strings, each one of the enum's names (or of the subset `check` lists).
  template <class E>
  SectionSchema& add_choice_list(const std::string& key, std::vector<E> S::*member, std::string doc, Check check) {
    if (check.choices.empty()) check.choices = names_of<E>();
    S defaults{};
    json default_names = json::array();
    for (E v : defaults.*member) default_names.push_back(name_of(v));
    keys_.push_back({key, "list of strings", "each " + check.describe(), std::move(doc), default_names, ""});
    std::string qualified = name_ + "." + key;
    readers_.push_back([member, check, qualified](S& s, const json& j, const Source& src) {
      std::string where = src.origin + ": key '" + qualified + "'";
      std::vector<std::string> texts;
      detail::read_value(j, texts, where);
      std::vector<E> values;
      for (const auto& text : texts) {
        detail::check_value(text, check, where);
        E value{};
        if (!parse_choice(text, value)) throw ConfigError(where + ": '" + text + "' is not a value of this key");
        values.push_back(value);
      }
      s.*member = std::move(values);
    });
    writers_.push_back([member, key](const S& s, json& out) {
      json names = json::array();
      for (E v : s.*member) names.push_back(name_of(v));
      out[key] = names;
    });
    return *this;
  }


  std::string name_, doc_;
  std::vector<KeyInfo> keys_;
  std::vector<std::function<void(S&, const json&, const Source&)>> readers_;
  std::vector<std::function<void(const S&, json&)>> writers_;
  std::function<void(S&, const std::set<std::string>&)> finalize_;
};

// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(const std::string& a, const std::string& b);
// The candidate closest to `word`, or "" if none is reasonably close.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace parla::config

namespace parla {

// A choice enum in JSON is its name (found by argument-dependent lookup for every enum of namespace parla that
// PARLA_CHOICES names), so `json{{"task", cfg.training.task}}` and `json == cfg.model.type` see "bert", never 1.
template <class E, std::enable_if_t<config::is_choice_v<E>, int> = 0>
void to_json(nlohmann::json& j, E value) {
  j = config::name_of(value);
}
template <class E, std::enable_if_t<config::is_choice_v<E>, int> = 0>
void from_json(const nlohmann::json& j, E& value) {
  if (!j.is_string() || !config::parse_choice(j.get<std::string>(), value))
    throw ConfigError(j.dump() + " is not " + config::one_of(config::names_of<E>()).describe());
}

}  // namespace parla

#include "core/schema_flags.h"

#include <cerrno>
#include <cstdlib>
#include <stdexcept>

namespace parla::app {

namespace {

// "--normalize" from "-n,--normalize,--lenpen": the first long name names the flag in messages.
std::string display_name(const std::string& names) {
  std::string first;
  size_t start = 0;
  while (start <= names.size()) {
    size_t comma = std::min(names.find(',', start), names.size());
    std::string n = names.substr(start, comma - start);
    if (!n.empty() && n[0] == '!') n.erase(0, 1);
    if (first.empty()) first = n;
    if (n.rfind("--", 0) == 0) return n;
    start = comma + 1;
  }
  return first;
}

std::string describe_default(const config::json& v) {
  if (v.is_string()) return v.get<std::string>().empty() ? "none" : v.get<std::string>();
  return v.dump();
}

std::string type_label(const std::string& type) {
  if (type == "int") return "INT";
  if (type == "float") return "FLOAT";
  if (type == "list of strings") return "TEXT,...";
  if (type == "list of ints") return "INT,...";
  return "TEXT";
}

}  // namespace

config::json SchemaFlags::value_of(const std::string& text, const std::string& type) {
  if ((type == "int" || type == "float") && !text.empty()) {
    const char* begin = text.c_str();
    char* end = nullptr;
    errno = 0;
    long long i = std::strtoll(begin, &end, 10);
    if (*end == '\0' && errno == 0) return config::json(static_cast<int64_t>(i));
    double d = std::strtod(begin, &end);
    if (*end == '\0') return config::json(d);
  }
  return config::json(text);
}

SchemaFlags::SchemaFlags(CLI::App& cli, const std::vector<std::string>& exposed,
                         const std::map<std::string, std::string>& extra_names) {
  for (const auto& item : exposed) {
    std::string section = item, only;
    auto keys = config::section_keys(section);
    if (keys.empty()) {
      auto dot = item.rfind('.');
      if (dot != std::string::npos) {
        section = item.substr(0, dot);
        only = item.substr(dot + 1);
        keys = config::section_keys(section);
      }
    }
    bool found = false;
    for (const auto& k : keys) {
      if (!only.empty() && k.key != only) continue;
      found = true;
      std::string qualified = section + "." + k.key;
      std::string names = k.flags;
      if (auto extra = extra_names.find(qualified); extra != extra_names.end())
        names = names.empty() ? extra->second : extra->second + "," + names;
      if (names.empty()) {
        if (!only.empty()) throw std::logic_error("config key '" + qualified + "' has no command-line names");
        continue;
      }
      auto e = std::make_unique<Entry>();
      e->key = qualified;
      e->type = k.type;
      e->name = display_name(names);
      std::string help = k.doc + " [" + qualified + (k.constraint.empty() ? "" : "; " + k.constraint) +
                         "; default " + describe_default(k.default_value) + "]";
      if (k.type == "bool") {
        e->option = cli.add_flag(names, e->on, help);
      } else if (k.type.rfind("list of ", 0) == 0) {
        e->option = cli.add_option(names, e->items, help)->delimiter(',')->type_name(type_label(k.type));
      } else {
        e->option = cli.add_option(names, e->text, help)->type_name(type_label(k.type));
      }
      e->option->group("Config keys of '" + section + "'");
      entries_.push_back(std::move(e));
    }
    if (!found) throw std::logic_error("SchemaFlags: no config section or key '" + item + "'");
  }
}

void SchemaFlags::apply(config::ConfigBuilder& builder) const {
  for (const auto& e : entries_) {
    if (e->option->count() == 0) continue;
    config::json value;
    if (e->type == "bool") {
      value = e->on;
    } else if (e->type.rfind("list of ", 0) == 0) {
      value = config::json::array();
      std::string element = e->type == "list of ints" ? "int" : "string";
      for (const auto& item : e->items) value.push_back(value_of(item, element));
    } else {
      value = value_of(e->text, e->type);
    }
    builder.set(e->key, value, e->name);
  }
}

std::string SchemaFlags::origin(const std::string& key) const {
  for (const auto& e : entries_)
    if (e->key == key && e->option->count() > 0) return e->name;
  return key;
}

std::vector<std::string> SchemaFlags::keys() const {
  std::vector<std::string> out;
  for (const auto& e : entries_) out.push_back(e->key);
  return out;
}

}  // namespace parla::app

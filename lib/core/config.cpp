#include "core/config.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>

#include "core/bounded_json.h"

namespace parla::config {

namespace {

// One section of Config, with the typed schema erased so that all sections can be walked alike.
struct Section {
  std::string name;
  std::string doc;
  std::vector<KeyInfo> keys;
  std::function<bool(Config&, const std::string&, const json&, const Source&)> set;
  std::function<json(const Config&)> to_json;
  std::function<void(Config&, const std::set<std::string>&)> finalize;
};

template <class S>
Section make_section(S& (*get)(Config&), const S& (*cget)(const Config&)) {
  const SectionSchema<S>& schema = S::schema();
  Section sec;
  sec.name = schema.name();
  sec.doc = schema.doc();
  sec.keys = schema.keys();
  sec.set = [&schema, get](Config& c, const std::string& key, const json& v, const Source& src) {
    return schema.set(get(c), key, v, src);
  };
  sec.to_json = [&schema, cget](const Config& c) { return schema.to_json(cget(c)); };
  sec.finalize = [&schema, get](Config& c, const std::set<std::string>& given) { schema.finalize(get(c), given); };
  return sec;
}

const std::vector<Section>& sections() {
  static const std::vector<Section> all = {
      make_section<DataConfig>([](Config& c) -> DataConfig& { return c.data; },
                               [](const Config& c) -> const DataConfig& { return c.data; }),
      make_section<CleanConfig>([](Config& c) -> CleanConfig& { return c.data.clean; },
                                [](const Config& c) -> const CleanConfig& { return c.data.clean; }),
      make_section<VocabConfig>([](Config& c) -> VocabConfig& { return c.vocab; },
                                [](const Config& c) -> const VocabConfig& { return c.vocab; }),
      make_section<ModelConfig>([](Config& c) -> ModelConfig& { return c.model; },
                                [](const Config& c) -> const ModelConfig& { return c.model; }),
      make_section<TrainingConfig>([](Config& c) -> TrainingConfig& { return c.training; },
                                   [](const Config& c) -> const TrainingConfig& { return c.training; }),
      make_section<DecodingConfig>([](Config& c) -> DecodingConfig& { return c.decoding; },
                                   [](const Config& c) -> const DecodingConfig& { return c.decoding; }),
      make_section<RuntimeConfig>([](Config& c) -> RuntimeConfig& { return c.runtime; },
                                  [](const Config& c) -> const RuntimeConfig& { return c.runtime; }),
      make_section<ServeConfig>([](Config& c) -> ServeConfig& { return c.serve; },
                                [](const Config& c) -> const ServeConfig& { return c.serve; }),
  };
  return all;
}

const Section* find_section(const std::string& name) {
  for (const auto& s : sections())
    if (s.name == name) return &s;
  return nullptr;
}

std::vector<std::string> section_names() {
  std::vector<std::string> names;
  for (const auto& s : sections()) names.push_back(s.name);
  return names;
}

[[noreturn]] void unknown_key(const std::string& key, const std::string& origin) {
  std::string msg = origin + ": unknown key '" + key + "'";
  std::string near = nearest(key, all_keys());
  if (near.empty()) near = nearest(key, section_names());
  if (!near.empty()) msg += "; did you mean '" + near + "'?";
  throw ConfigError(msg);
}

}  // namespace

void ConfigBuilder::load_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("cannot read config file '" + path + "'");
  // A config is a few KB; the bound keeps a wrong path (a corpus, /dev/zero) from filling memory.
  constexpr size_t kMaxConfigBytes = 16u << 20;
  std::string text;
  char chunk[1 << 16];
  while (text.size() <= kMaxConfigBytes && in.read(chunk, sizeof chunk).gcount() > 0)
    text.append(chunk, static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes)
    throw ConfigError(path + ": larger than the " + std::to_string(kMaxConfigBytes >> 20) + " MiB a config may be");
  json j;
  try {
    JsonLimits limits;
    limits.allow_comments = true;
    j = parse_bounded_json(text, limits, path);
  } catch (const JsonError& e) {
    throw ConfigError(e.kind() == JsonErrorKind::kInvalid ? path + ": invalid JSON: " + e.detail() : e.what());
  }
  file_ = path;
  merge(j, path);
}

void ConfigBuilder::merge(const json& j, const std::string& origin) {
  if (!j.is_object()) throw ConfigError(origin + ": a config must be a JSON object of sections");
  // Walks nested objects; "data": {"clean": {...}} reaches the section "data.clean".
  std::function<void(const std::string&, const json&)> walk = [&](const std::string& prefix, const json& obj) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
      if (find_section(key)) {
        if (!it.value().is_object()) throw ConfigError(origin + ": section '" + key + "' must be a JSON object");
        walk(key, it.value());
      } else if (prefix.empty()) {
        unknown_key(key, origin);
      } else {
        set(key, it.value(), origin);
      }
    }
  };
  walk("", j);
}

void ConfigBuilder::set(const std::string& key, const json& value, const std::string& origin) {
  auto dot = key.rfind('.');
  if (dot == std::string::npos) unknown_key(key, origin);
  const Section* sec = find_section(key.substr(0, dot));
  if (!sec || !sec->set(config_, key.substr(dot + 1), value, Source{origin})) unknown_key(key, origin);
  given_.insert(key);
}

void ConfigBuilder::set_assignment(const std::string& assignment) {
  std::string origin = "--set " + assignment;
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError(origin + ": expected KEY=VALUE, e.g. --set training.lr=0.0007");
  std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) value = text;  // bare words (--set model.type=rnn) are strings
  set(key, value, origin);
}

void ConfigBuilder::require(const std::string& key, const std::string& hint) const {
  if (given(key)) return;
  std::string msg = "missing required key '" + key + "'";
  msg += file_.empty() ? " (no --config file given" : " (not set in config file '" + file_ + "'";
  msg += hint.empty() ? "; set it with --set " + key + "=...)" : "; " + hint + ")";
  throw ConfigError(msg);
}

Config ConfigBuilder::build() const {
  Config c = config_;
  for (const auto& sec : sections()) {
    std::set<std::string> given_in_section;
    std::string prefix = sec.name + ".";
    for (const auto& k : given_)
      if (k.compare(0, prefix.size(), prefix) == 0 && k.find('.', prefix.size()) == std::string::npos)
        given_in_section.insert(k.substr(prefix.size()));
    sec.finalize(c, given_in_section);
  }
  return c;
}

json to_json(const Config& c) {
  json out = json::object();
  for (const auto& sec : sections()) {
    json* target = &out;
    std::string name = sec.name;
    for (auto dot = name.find('.'); dot != std::string::npos; dot = name.find('.')) {
      target = &(*target)[name.substr(0, dot)];
      name = name.substr(dot + 1);
    }
    (*target)[name].update(sec.to_json(c));
  }
  return out;
}

std::vector<KeyInfo> section_keys(const std::string& section) {
  const Section* sec = find_section(section);
  return sec ? sec->keys : std::vector<KeyInfo>{};
}

std::vector<std::string> all_keys() {
  std::vector<std::string> keys;
  for (const auto& sec : sections())
    for (const auto& k : sec.keys) keys.push_back(sec.name + "." + k.key);
  return keys;
}

std::string reference_markdown() {
  std::ostringstream os;
  os << "# Configuration reference\n\n"
     << "All four executables read one JSON file (`--config FILE`) and take overrides with `--set KEY=VALUE` "
     << "(repeatable; the value is JSON, or a bare string). Precedence: defaults < file < `--set` and named flags. "
     << "`--dump-config` prints the effective config. Unknown keys, wrong types and out-of-range values are "
     << "rejected with exit code 2 before any work starts.\n\n"
     << "The column *flags* gives a key's command-line names; each executable offers those of the sections it "
     << "reads (its `--help` lists them), and a flag overrides the file like `--set`.\n\n"
     << "This file is generated from the schema in `lib/core/config/` (`tools/gen-config-doc.sh`); a test "
     << "checks that it is current.\n";
  for (const auto& sec : sections()) {
    os << "\n## `" << sec.name << "`\n\n" << sec.doc << "\n\n";
    os << "| key | flags | type | default | allowed | meaning |\n|---|---|---|---|---|---|\n";
    for (const auto& k : sec.keys) {
      std::string flags;
      for (size_t start = 0; start < k.flags.size();) {
        size_t comma = std::min(k.flags.find(',', start), k.flags.size());
        flags += (flags.empty() ? "`" : ", `") + k.flags.substr(start, comma - start) + "`";
        start = comma + 1;
      }
      os << "| `" << k.key << "` | " << flags << " | " << k.type << " | `" << k.default_value.dump() << "` | "
         << k.constraint << " | " << k.doc << " |\n";
    }
  }
  return os.str();
}

}  // namespace parla::config

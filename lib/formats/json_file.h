#pragma once
// JSON files someone else wrote (a Hugging Face config.json, a vocab.json), read as data: bounded in size and
// nesting before they are parsed, and read through accessors whose errors name the file and the key.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace parla::formats {

// The file parsed. DataError naming it when it is missing, larger than `max_bytes`, nested deeper than 64 levels
// or not JSON.
nlohmann::json read_json_file(const std::string& path, uint64_t max_bytes);

// Typed fields of a JSON object; every failure is a DataError "PATH: key 'K' ...".
class JsonFields {
 public:
  JsonFields(std::string path, nlohmann::json object);
  bool has(const std::string& key) const;
  int64_t integer(const std::string& key) const;
  // integer(key), refused unless in [lo, hi]: check a value before narrowing it (4294967298 layers read as an int
  // were 2).
  int64_t integer(const std::string& key, int64_t lo, int64_t hi) const;
  double number(const std::string& key) const;
  bool boolean(const std::string& key) const;
  std::string string(const std::string& key) const;
  const nlohmann::json& json() const { return j_; }

 private:
  const nlohmann::json& at(const std::string& key) const;
  std::string path_;
  nlohmann::json j_;
};

}  // namespace parla::formats

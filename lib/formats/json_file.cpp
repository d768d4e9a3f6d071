#include "formats/json_file.h"

#include "core/error.h"
#include "formats/bounded_file.h"

namespace parla::formats {

nlohmann::json read_json_file(const std::string& path, uint64_t max_bytes) {
  const std::string text = read_bounded_file(path, max_bytes);
  auto guard = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > 64) throw DataError(path + ": JSON nested deeper than 64 levels");
    return true;
  };
  try {
    return nlohmann::json::parse(text, guard);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path + ": not valid JSON (" + std::string(e.what()).substr(0, 200) + ")");
  }
}

JsonFields::JsonFields(std::string path, nlohmann::json object) : path_(std::move(path)), j_(std::move(object)) {
  if (!j_.is_object()) throw DataError(path_ + ": not a JSON object");
}

bool JsonFields::has(const std::string& key) const { return j_.contains(key) && !j_[key].is_null(); }

const nlohmann::json& JsonFields::at(const std::string& key) const {
  if (!has(key)) throw DataError(path_ + ": key '" + key + "' is missing");
  return j_[key];
}

int64_t JsonFields::integer(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_number_integer()) throw DataError(path_ + ": key '" + key + "' is not an integer");
  return v.get<int64_t>();
}

double JsonFields::number(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_number()) throw DataError(path_ + ": key '" + key + "' is not a number");
  return v.get<double>();
}

bool JsonFields::boolean(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_boolean()) throw DataError(path_ + ": key '" + key + "' is not true or false");
  return v.get<bool>();
}

std::string JsonFields::string(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_string()) throw DataError(path_ + ": key '" + key + "' is not a string");
  return v.get<std::string>();
}

}  // namespace parla::formats

#include "formats/json_file.h"

#include "core/bounded_json.h"
#include "core/error.h"
#include "formats/bounded_file.h"

namespace parla::formats {

nlohmann::json read_json_file(const std::string& path, uint64_t max_bytes) {
  const std::string text = read_bounded_file(path, max_bytes);
  return parse_bounded_json(text, JsonLimits{}, path);
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
  // nlohmann keeps integers above INT64_MAX unsigned; get<int64_t> would wrap them to negative numbers.
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    throw DataError(path_ + ": key '" + key + "' is " + v.dump() + ", out of range");
  return v.get<int64_t>();
}

int64_t JsonFields::integer(const std::string& key, int64_t lo, int64_t hi) const {
  const int64_t v = integer(key);
  if (v < lo || v > hi)
    throw DataError(path_ + ": key '" + key + "' is " + std::to_string(v) + ", out of range (" + std::to_string(lo) +
                    " .. " + std::to_string(hi) + ")");
  return v;
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

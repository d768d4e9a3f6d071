#include "formats/safetensors.h"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/bounded_json.h"
#include "core/error.h"

namespace parla::formats {

namespace {

struct DTypeInfo {
  DType type;
  const char* name;
  size_t size;
};

constexpr DTypeInfo kTypes[] = {
    {DType::F64, "F64", 8}, {DType::F32, "F32", 4}, {DType::F16, "F16", 2}, {DType::BF16, "BF16", 2},
    {DType::I64, "I64", 8}, {DType::I32, "I32", 4}, {DType::I16, "I16", 2}, {DType::I8, "I8", 1},
    {DType::U8, "U8", 1},   {DType::BOOL, "BOOL", 1},
};

const DTypeInfo& info(DType t) {
  for (const auto& i : kTypes)
    if (i.type == t) return i;
  throw std::logic_error("unknown dtype");
}

// A short, flat excerpt of a client-supplied name for messages (never the whole of a hostile value).
std::string excerpt(const std::string& s) {
  constexpr size_t kMax = 80;
  return "'" + (s.size() > kMax ? s.substr(0, kMax) + "..." : s) + "'";
}

uint64_t to_u64(const nlohmann::json& v, const std::string& what) {
  if (!v.is_number_unsigned()) throw DataError("safetensors header: " + what + " is not a non-negative integer");
  return v.get<uint64_t>();
}

}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
const char* dtype_name(DType t) { return info(t).name; }

std::optional<DType> parse_dtype(const std::string& name) {
  for (const auto& i : kTypes)
    if (name == i.name) return i.type;
  return std::nullopt;
}

SafetensorsHeader parse_safetensors(const uint8_t* bytes, size_t size) {
  if (size < 8) throw DataError("too short for a safetensors file (" + std::to_string(size) + " bytes)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n > size - 8)
    throw DataError("safetensors header length " + std::to_string(n) + " is beyond the end of the file (" +
                    std::to_string(size) + " bytes): truncated, or not a safetensors file");
  if (n > kMaxSafetensorsHeader)
    throw DataError("safetensors header of " + std::to_string(n) + " bytes is larger than the " +
                    std::to_string(kMaxSafetensorsHeader) + " accepted");
  if (n < 2 || bytes[8] != '{') throw DataError("not a safetensors file (the header does not start with '{')");

  SafetensorsHeader h;
  h.data_start = 8 + n;
  const uint64_t data_size = size - h.data_start;
  bool has_metadata = false;
  // Each entry is checked as soon as the parse completes it and then dropped (core/bounded_json.h), so the header
  // never exists as a JSON tree: about 10 bytes of memory per byte of header. The header nests three deep at most
  // (top object, a tensor's object, its shape); anything deeper is refused while parsing, before a deep value exists.
  // A key given twice in a tensor's entry is refused there, a tensor name given twice below.
  JsonLimits limits;
  limits.max_depth = 3;
  limits.refuse_duplicate_keys = true;
  auto entry = [&](const std::string& name, nlohmann::json& v) {
    if (name == "__metadata__") {
      if (has_metadata) throw DataError("safetensors header names " + excerpt(name) + " twice");
      has_metadata = true;
      if (!v.is_object()) throw DataError("safetensors __metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          throw DataError("safetensors __metadata__ value of " + excerpt(m.key()) + " is not a string");
        h.metadata[m.key()] = std::move(m.value().get_ref<std::string&>());
      }
      return;
    }
    const std::string what = "tensor " + excerpt(name);
    if (name.empty()) throw DataError("safetensors header has a tensor without a name");
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      throw DataError("safetensors header: " + what + " lacks its dtype, shape or data_offsets");
    TensorEntry t;
    t.name = name;
    const auto& dt = v["dtype"];
    auto parsed = dt.is_string() ? parse_dtype(dt.get<std::string>()) : std::nullopt;
    if (!parsed)
      throw DataError("safetensors header: " + what + " has dtype " + (dt.is_string() ? excerpt(dt.get<std::string>()) : "?") +
                      ", which parla does not read (F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL)");
    t.dtype = *parsed;
    const auto& shape = v["shape"];
    if (!shape.is_array()) throw DataError("safetensors header: " + what + " has a shape that is not a list");
    uint64_t bytes_needed = dtype_size(t.dtype);
    for (const auto& d : shape) {
      const uint64_t dim = to_u64(d, "a dimension of " + what);
      if (dim > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(bytes_needed, dim, &bytes_needed))
        throw DataError("safetensors header: the shape of " + what + " overflows");
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2)
      throw DataError("safetensors header: " + what + " has data_offsets that are not [begin, end]");
    t.begin = to_u64(off[0], "the data_offsets of " + what);
    t.end = to_u64(off[1], "the data_offsets of " + what);
    if (t.begin > t.end || t.end > data_size)
      throw DataError("safetensors header: " + what + " has data_offsets [" + std::to_string(t.begin) + ", " +
                      std::to_string(t.end) + "] outside the " + std::to_string(data_size) + " bytes of data");
    if (t.end - t.begin != bytes_needed)
      throw DataError("safetensors header: " + what + " has " + std::to_string(t.end - t.begin) +
                      " bytes of data, its dtype and shape need " + std::to_string(bytes_needed));
    h.tensors.push_back(std::move(t));
  };
  try {
    parse_bounded_json_members(std::string_view(reinterpret_cast<const char*>(bytes) + 8, n), limits,
                               "safetensors header", entry);
  } catch (const JsonError& e) {
    if (e.detail() == "not a JSON object") throw DataError("safetensors header is not a JSON object");
    throw;
  }
  // Tensor names given twice: adjacent once sorted by name (the entries are sorted by their data below).
  {
    std::vector<const std::string*> names;
    names.reserve(h.tensors.size());
    for (const auto& t : h.tensors) names.push_back(&t.name);
    std::sort(names.begin(), names.end(), [](const std::string* a, const std::string* b) { return *a < *b; });
    for (size_t i = 1; i < names.size(); ++i)
      if (*names[i] == *names[i - 1]) throw DataError("safetensors header names " + excerpt(*names[i]) + " twice");
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  for (const auto& t : h.tensors) {
    if (t.begin != at)
      throw DataError("safetensors data of tensor " + excerpt(t.name) +
                      (t.begin < at ? " overlaps the tensor before it" : " leaves a hole before it"));
    at = t.end;
  }
  if (at != data_size)
    throw DataError("safetensors data section has " + std::to_string(data_size) + " bytes, its tensors cover " +
                    std::to_string(at));
  return h;
}

std::string layout_safetensors(std::vector<TensorEntry>& tensors, const std::map<std::string, std::string>& metadata) {
  std::stable_sort(tensors.begin(), tensors.end(), [](const TensorEntry& a, const TensorEntry& b) {
    const size_t sa = dtype_size(a.dtype), sb = dtype_size(b.dtype);
    return sa != sb ? sa > sb : a.name < b.name;
  });
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t at = 0;
  for (auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") throw DataError("cannot store a tensor named " + excerpt(t.name));
    if (header.contains(t.name)) throw DataError("two tensors are named " + excerpt(t.name));
    uint64_t bytes = dtype_size(t.dtype);
    for (int64_t d : t.shape) bytes *= static_cast<uint64_t>(d);
    t.begin = at;
    t.end = at + bytes;
    at = t.end;
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

}  // namespace parla::formats

#pragma once
// The safetensors format (Hugging Face's, https://github.com/huggingface/safetensors): an unsigned little-endian
// 64-bit header length N, N bytes of JSON {"__metadata__": {string: string}, NAME: {"dtype", "shape",
// "data_offsets": [BEGIN, END]}, ...}, then the tensors' bytes, row-major and little-endian, BEGIN and END counted
// from the first byte after the header. A file holds data and nothing that runs, which is why parla keeps its
// checkpoints in it. Torch-free, so the fuzz target builds it alone.
//
// The reader trusts nothing: the header length is checked against the file, every shape and range against its
// dtype (with overflow checks) and against the file, and the ranges must tile the data exactly, without holes or
// overlaps (the reference implementation's rule, which also rules out polyglot files).
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace parla::formats {

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

size_t dtype_size(DType t);
// safetensors' name of the type ("F32", "BF16", ...).
const char* dtype_name(DType t);
std::optional<DType> parse_dtype(const std::string& name);

struct TensorEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range in the data section
};

struct SafetensorsHeader {
  std::map<std::string, std::string> metadata;  // "__metadata__"
  std::vector<TensorEntry> tensors;             // in the order of their data
  uint64_t data_start = 0;                      // file offset of the data section (8 + header length)
};

// The largest header accepted, as the reference implementation (100 MB).
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

// Parses and checks the header of the `size` bytes at `bytes` (a whole file). DataError saying what is wrong
// (without a file name: the caller adds it).
SafetensorsHeader parse_safetensors(const uint8_t* bytes, size_t size);

// Lays out `tensors` (name, dtype, shape; their ranges are assigned here) and returns the bytes that precede the
// data: the length and the JSON header, padded with spaces so that the data starts 8-byte aligned. Tensors are
// placed by decreasing element size, then by name, so each starts aligned to its element size; `tensors` is
// reordered to the order of the data. DataError on duplicate or empty names.
std::string layout_safetensors(std::vector<TensorEntry>& tensors, const std::map<std::string, std::string>& metadata);

}  // namespace parla::formats

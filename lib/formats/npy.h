#pragma once
// NumPy's .npy format (numpy.lib.format, versions 1-3), the arrays inside the .npz files that Marian (OPUS-MT)
// saves its models in: the magic "\x93NUMPY", a version, a little-endian header length, a header that is a Python
// dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (58101, 512), }, then the raw data. The header
// is parsed as data by a small grammar of its own (strings, booleans, integer tuples); nothing is evaluated.
// Torch-free (fuzzed).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "formats/safetensors.h"  // DType

namespace parla::formats {

struct NpyArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // () for a scalar
  size_t data_offset = 0;      // where the row-major, little-endian data starts
  size_t data_bytes = 0;       // product of shape x element size, checked against the input
};

// DataError saying what is wrong: not .npy, big-endian or Fortran-ordered data, a type parla does not read,
// a shape whose data is not all there.
NpyArray parse_npy(const uint8_t* bytes, size_t size);

}  // namespace parla::formats

#pragma once
// NumPy's .npz: a zip of NAME.npy arrays (numpy.savez stores them, savez_compressed deflates them), the container
// Marian saves models in. Torch-free (fuzzed with the other readers).
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "formats/npy.h"

namespace parla::formats {

struct NpzEntry {
  NpyArray array;     // offsets into `bytes`
  std::string bytes;  // the whole .npy entry
};

// Every array, by name without ".npy". Deflated entries may not inflate past 64 times their compressed size
// (numbers compress far less; a zip bomb far more), nor all of them past 16 times the archive. DataError
// saying what is wrong (the caller adds the file's name).
std::map<std::string, NpzEntry> read_npz(const uint8_t* data, size_t size);

}  // namespace parla::formats

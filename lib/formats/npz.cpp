#include "formats/npz.h"

#include "core/error.h"
#include "formats/zip_archive.h"

namespace parla::formats {

std::map<std::string, NpzEntry> read_npz(const uint8_t* data, size_t size) {
  ZipArchive zip(data, size);
  std::map<std::string, NpzEntry> out;
  uint64_t total = 0;
  const uint64_t total_cap = 16 * static_cast<uint64_t>(size) + (64u << 20);
  for (size_t i = 0; i < zip.entries().size(); ++i) {
    const auto& e = zip.entries()[i];
    if (e.name.size() < 4 || e.name.compare(e.name.size() - 4, 4, ".npy") != 0)
      throw DataError(".npz entry '" + e.name.substr(0, 80) + "' is not a .npy array");
    const uint64_t cap = e.stored ? size : 64 * e.compressed_size + (1u << 20);
    total += e.size;
    if (e.size > cap || total > total_cap)
      throw DataError(".npz entry '" + e.name.substr(0, 80) + "' declares " + std::to_string(e.size) +
                      " bytes, more than its compressed size can hold");
    NpzEntry entry;
    entry.bytes = zip.read(i, cap);
    try {
      entry.array = parse_npy(reinterpret_cast<const uint8_t*>(entry.bytes.data()), entry.bytes.size());
    } catch (const DataError& err) {
      throw DataError(".npz entry '" + e.name.substr(0, 80) + "': " + err.what());
    }
    const std::string name = e.name.substr(0, e.name.size() - 4);
    if (!out.emplace(name, std::move(entry)).second)
      throw DataError(".npz holds '" + name.substr(0, 80) + "' twice");
  }
  return out;
}

}  // namespace parla::formats

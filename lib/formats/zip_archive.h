#pragma once
// Reading zip archives (PyTorch's and TorchScript's .pt files, NumPy's .npz) through libzip, from bytes already
// in memory (a mapped file). Every entry is read against a byte limit the caller sets, so an entry that claims or
// inflates to more than the file could hold is refused before it is allocated.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace parla::formats {

class ZipArchive {
 public:
  // The `size` bytes at `data` must outlive the archive. DataError when they are not a readable zip archive.
  ZipArchive(const uint8_t* data, size_t size);
  ~ZipArchive();
  ZipArchive(const ZipArchive&) = delete;
  ZipArchive& operator=(const ZipArchive&) = delete;

  struct Entry {
    std::string name;
    uint64_t size = 0;             // uncompressed, as the archive declares it
    uint64_t compressed_size = 0;
    bool stored = true;            // not compressed
  };
  const std::vector<Entry>& entries() const { return entries_; }
  std::optional<size_t> find(const std::string& name) const;
  // The whole entry. DataError when it declares more than `max_bytes`, is compressed with a method libzip does not
  // know, or is corrupt (a short read, a CRC mismatch).
  std::string read(size_t index, uint64_t max_bytes) const;
  // A stored (uncompressed) entry's bytes where they lie in the archive, without a copy, its CRC checked as read()
  // checks it; nullopt where the entry is compressed or where its place in the bytes cannot be told (then read()
  // copies it out). DataError as read() for one that declares too much or is damaged.
  std::optional<std::string_view> stored_bytes(size_t index, uint64_t max_bytes) const;

 private:
  void* zip_ = nullptr;  // zip_t*
  std::vector<Entry> entries_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::vector<uint64_t> local_headers_;  // each entry's local header offset, from the central directory; or empty
  std::vector<uint32_t> crcs_;
};

}  // namespace parla::formats

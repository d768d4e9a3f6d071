#pragma once
// A whole file mapped into memory, privately: the file is never written through it (a page written to becomes a
// copy of the process's own). Readers of model files parse the mapping in place: nothing is read or allocated
// before its size has been checked against the file's, and pages the reader never touches are never read from
// disk. A file truncated by someone else while it is mapped (replaced in place: cp over it, rsync --inplace) makes
// reads past its new end fault (SIGBUS): a SIGBUS handler, for the addresses of live mappings only, maps zeros over
// the page and marks the file changed, and the reader refuses it (check_unchanged) rather than the process dying.
// What is kept after loading is copied out of the mapping.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <sys/stat.h>

#include "core/regular_file.h"

namespace parla::formats {

using parla::open_regular_file;  // core/regular_file.h: where it lives, below text/ and formats/

class MappedFile {
 public:
  // DataError naming the file when it is missing, not a regular file or cannot be mapped.
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Whether a read of the mapping faulted because the file shrank under it (those pages then read as zeros).
  bool changed() const { return changed_.load(std::memory_order_acquire); }
  // DataError "PATH changed while it was read" where changed(): whatever was read from it is not to be used.
  void check_unchanged() const;

  // The whole pages of [begin, begin + bytes) leave this process's memory (madvise: the page cache keeps them, and
  // a later read maps them in again), so that a reader copying a large file out piece by piece holds one piece of
  // it at a time, not the whole file, at its peak. Pages written through a view would lose what was written:
  // only for ranges that were read. A range outside the mapping is ignored. check_unchanged() first: the loaders
  // release each piece right after copying it.
  void release(const void* begin, size_t bytes) const;

 private:
  MappedFile() = default;
  friend struct MappingGuard;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
  mutable std::atomic<bool> changed_{false};
  int slot_ = -1;  // in the SIGBUS handler's table of live mappings (-1: none was free, or nothing is mapped)
};

}  // namespace parla::formats

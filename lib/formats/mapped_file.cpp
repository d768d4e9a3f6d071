#include "formats/mapped_file.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/memory_pages.h"

namespace parla::formats {

namespace {

[[noreturn]] void refuse_type(const std::string& path, mode_t mode) {
  throw DataError(path + (S_ISDIR(mode) ? ": is a folder, not a file"
                                        : ": not a regular file (a FIFO, device or socket), refused unread"));
}

}  // namespace

int open_regular_file(const std::string& path, struct stat& st) {
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) throw DataError(path + ": file does not exist");
    throw DataError(path + ": cannot open: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) refuse_type(path, st.st_mode);
  // O_NONBLOCK: should the path have become a FIFO since the stat, opening it returns at once instead of waiting
  // for a writer, and the fstat below refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) throw DataError(path + ": file does not exist");
    throw DataError(path + ": cannot open: " + std::strerror(errno));
  }
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw DataError(path + ": cannot read: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    refuse_type(path, st.st_mode);
  }
  return fd;
}

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  struct stat st {};
  const int fd = open_regular_file(path, st);
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = path;
  m->size_ = static_cast<size_t>(st.st_size);
  if (m->size_ > 0) {
    // Private: a page someone writes to (a tensor viewing the file, changed in place) becomes a copy of this
    // process's own, so nothing ever writes through to the file and no write faults.
    void* p = ::mmap(nullptr, m->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      throw DataError(path + ": cannot map into memory: " + std::strerror(e));
    }
    m->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return m;
}

void MappedFile::release(const void* begin, size_t bytes) const {
  const auto start = reinterpret_cast<uintptr_t>(begin), base = reinterpret_cast<uintptr_t>(data_);
  if (!data_ || start < base || bytes > size_ || start - base > size_ - bytes) return;
  release_pages(begin, bytes);
}

MappedFile::~MappedFile() {
  if (data_ && size_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace parla::formats

#include "core/regular_file.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "core/error.h"

namespace parla {
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

std::string read_bounded_file(const std::string& path, uint64_t max_bytes) {
  struct stat st {};
  const int fd = open_regular_file(path, st);  // a FIFO or device is refused before it is opened
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    ::close(fd);
    throw DataError(path + ": " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) +
                    " such a file may have");
  }
  std::string s(static_cast<size_t>(size), '\0');
  size_t got = 0;
  while (got < s.size()) {
    const ssize_t n = ::read(fd, s.data() + got, s.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : 0;
      ::close(fd);
      throw DataError(path + ": cannot be read" + (e ? std::string(": ") + std::strerror(e) : ": it became shorter"));
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return s;
}

}  // namespace parla

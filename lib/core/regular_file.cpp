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

std::string read_regular_file(const std::string& path, size_t max_bytes) {
  struct stat st {};
  const int fd = open_regular_file(path, st);
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } close_it{fd};
  auto too_large = [&] {
    return DataError(path + ": larger than " + std::to_string(max_bytes) + " bytes (" +
                     std::to_string(max_bytes >> 20) + " MiB), refused");
  };
  if (static_cast<uint64_t>(st.st_size) > max_bytes) throw too_large();
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw DataError(path + ": cannot read: " + std::strerror(errno));
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes) throw too_large();
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace parla

#include "formats/bounded_file.h"

#include <cerrno>
#include <cstring>

#include <unistd.h>

#include "core/error.h"
#include "formats/mapped_file.h"

namespace parla::formats {

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

}  // namespace parla::formats

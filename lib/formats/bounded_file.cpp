#include "formats/bounded_file.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace parla::formats {

std::string read_bounded_file(const std::string& path, uint64_t max_bytes) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw DataError(path + ": missing or unreadable (" + ec.message() + ")");
  if (size > max_bytes)
    throw DataError(path + ": " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) +
                    " such a file may have");
  std::ifstream in(path, std::ios::binary);
  std::string s(static_cast<size_t>(size), '\0');
  if (!in.read(s.data(), static_cast<std::streamsize>(size))) throw DataError(path + ": cannot be read");
  return s;
}

}  // namespace parla::formats

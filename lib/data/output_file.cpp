#include "data/output_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace parla::data {

OutputFile::OutputFile(const std::string& path) : path_(path) {
  f_ = std::fopen(path.c_str(), "wb");
  if (!f_) throw IoError("cannot create '" + path + "': " + std::strerror(errno));
  std::setvbuf(f_, nullptr, _IOFBF, 1 << 20);
}

OutputFile::~OutputFile() {
  if (f_) std::fclose(f_);
}

void OutputFile::fail(const char* what) {
  int e = errno;
  if (f_) std::fclose(f_);
  f_ = nullptr;
  throw IoError(std::string("cannot ") + what + " '" + path_ + "': " + std::strerror(e));
}

void OutputFile::write(const void* data, size_t n) {
  if (!f_) throw IoError("write to closed file '" + path_ + "'");
  if (n && std::fwrite(data, 1, n, f_) != n) fail("write");
}

void OutputFile::write_line(std::string_view s) {
  write(s);
  write("\n", 1);
}

void OutputFile::write_at(uint64_t offset, const void* data, size_t n) {
  if (!f_) throw IoError("write to closed file '" + path_ + "'");
  long here = std::ftell(f_);
  if (here < 0 || std::fseek(f_, static_cast<long>(offset), SEEK_SET) != 0) fail("seek in");
  write(data, n);
  if (std::fseek(f_, here, SEEK_SET) != 0) fail("seek in");
}

void OutputFile::close() {
  if (!f_) return;
  if (std::fflush(f_) != 0) fail("write");
  std::FILE* f = f_;
  f_ = nullptr;
  if (std::fclose(f) != 0) {
    int e = errno;
    throw IoError("cannot write '" + path_ + "': " + std::strerror(e));
  }
}

void write_file_atomically(const std::string& path, std::string_view content) {
  std::string tmp = path + ".tmp";
  {
    OutputFile f(tmp);
    f.write(content);
    f.close();
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw IoError("cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
  }
}

}  // namespace parla::data

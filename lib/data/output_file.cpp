#include "data/output_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace parla::data {

namespace {

// strerror of a captured errno; a failure that left none (a stream error without a system call) still reads.
std::string reason(int e) { return e != 0 ? std::strerror(e) : "unknown error"; }

}  // namespace

OutputFile::OutputFile(const std::string& path, Mode mode) : path_(path), name_("'" + path + "'") {
  f_ = std::fopen(path.c_str(), mode == Mode::append ? "ab" : "wb");
  if (!f_) throw IoError("cannot create " + name_ + ": " + reason(errno));
  std::setvbuf(f_, nullptr, _IOFBF, 1 << 20);
}

OutputFile::OutputFile(std::FILE* stream, std::string name)
    : f_(stream), owned_(false), name_(std::move(name)) {}

OutputFile::~OutputFile() {
  if (f_ && owned_) std::fclose(f_);
}

// errno is read first: fclose below, or anything else, may overwrite the reason the failing call left.
void OutputFile::fail(const char* what) {
  int e = errno;
  if (f_ && owned_) std::fclose(f_);
  f_ = nullptr;
  throw IoError(std::string("cannot ") + what + " " + name_ + ": " + reason(e));
}

void OutputFile::write(const void* data, size_t n) {
  if (!f_) throw IoError("write to closed file " + name_);
  errno = 0;
  if (n && std::fwrite(data, 1, n, f_) != n) fail("write");
}

void OutputFile::write_line(std::string_view s) {
  write(s);
  write("\n", 1);
}

void OutputFile::write_at(uint64_t offset, const void* data, size_t n) {
  if (!f_) throw IoError("write to closed file " + name_);
  long here = std::ftell(f_);
  if (here < 0 || std::fseek(f_, static_cast<long>(offset), SEEK_SET) != 0) fail("seek in");
  write(data, n);
  if (std::fseek(f_, here, SEEK_SET) != 0) fail("seek in");
}

void OutputFile::flush() {
  if (!f_) throw IoError("write to closed file " + name_);
  errno = 0;
  if (std::fflush(f_) != 0) fail("write");
}

void OutputFile::close() {
  if (!f_) return;
  flush();
  std::FILE* f = f_;
  f_ = nullptr;
  if (!owned_) return;
  errno = 0;
  if (std::fclose(f) != 0) {
    int e = errno;
    throw IoError("cannot write " + name_ + ": " + reason(e));
  }
}

AtomicOutputFile::AtomicOutputFile(const std::string& path) : path_(path), tmp_(path + ".tmp") {
  file_.emplace(tmp_);
}

AtomicOutputFile::~AtomicOutputFile() {
  if (!committed_) discard();
}

void AtomicOutputFile::discard() {
  file_.reset();  // closed before it is removed
  std::error_code ec;
  std::filesystem::remove(tmp_, ec);
}

void AtomicOutputFile::commit() {
  try {
    file_->close();
  } catch (...) {
    discard();
    throw;
  }
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) {
    discard();
    throw IoError("cannot rename '" + tmp_ + "' to '" + path_ + "': " + ec.message());
  }
  committed_ = true;
}

void write_file_atomically(const std::string& path, std::string_view content) {
  AtomicOutputFile f(path);
  f.file().write(content);
  f.commit();
}

}  // namespace parla::data

#include "core/output_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace parla {

namespace {

// strerror of a captured errno; a failure that left none (a stream error without a system call) still reads.
std::string reason(int e) { return e != 0 ? std::strerror(e) : "unknown error"; }

// A path that exists and that a rename must not replace: a FIFO, a device or a socket. A directory is left to
// the rename, which refuses it with a message naming both paths.
bool written_in_place(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

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

AtomicOutputFile::AtomicOutputFile(const std::string& path)
    : path_(path), tmp_(written_in_place(path) ? std::string() : parla::temporary_path(path)) {
  if (!tmp_.empty()) target_.emplace(path_, tmp_);
  file_.emplace(tmp_.empty() ? path_ : tmp_);
}

AtomicOutputFile::~AtomicOutputFile() {
  if (!committed_) discard();
}

void AtomicOutputFile::discard() {
  file_.reset();  // closed before it is removed
  if (target_) target_->discard();  // written in place: what was written stays with its reader
}

void AtomicOutputFile::commit() {
  try {
    file_->close();
  } catch (...) {
    discard();
    throw;
  }
  if (target_) {
    if (auto ec = target_->commit()) throw IoError("cannot rename '" + tmp_ + "' to '" + path_ + "': " + ec.message());
  }
  committed_ = true;
}

void write_file_atomically(const std::string& path, std::string_view content) {
  AtomicOutputFile f(path);
  f.file().write(content);
  f.commit();
}

}  // namespace parla

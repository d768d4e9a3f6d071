#pragma once
// A buffered output file whose every failure (unwritable directory, disk full, file size limit, closed pipe)
// becomes an IoError naming the file and the system's reason (strerror of the errno the failing call left),
// checked on write, flush and close, so no error passes silently into a half-written output.
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_file.h"

namespace parla {

class OutputFile {
 public:
  enum class Mode { truncate, append };
  explicit OutputFile(const std::string& path, Mode mode = Mode::truncate);
  // An already open stream (stdout) that this object neither opened nor closes: close() only flushes it.
  // `name` stands for it in errors ("standard output").
  OutputFile(std::FILE* stream, std::string name);
  ~OutputFile();  // closes without checking; call close() to learn about errors
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  void write_line(std::string_view s);
  // Writes at an absolute position (for headers filled in at the end).
  void write_at(uint64_t offset, const void* data, size_t n);
  // Hands the buffered bytes to the system (IoError when it refuses them).
  void flush();
  void close();
  const std::string& path() const { return path_; }
  // How errors name the file: 'PATH' in quotes, or the name given for a borrowed stream.
  const std::string& name() const { return name_; }

 private:
  [[noreturn]] void fail(const char* what);
  std::FILE* f_ = nullptr;
  bool owned_ = true;
  std::string path_, name_;
};

// PATH written as its temporary sibling (core/atomic_file.h) and renamed into place by commit(), so that PATH is either
// whole or untouched: destroyed without commit() (an error on the way), it removes the temporary. A PATH that
// exists and is neither a regular file nor a directory (a FIFO, a character device such as /dev/stdout or
// /dev/null) is written in place instead: renaming over it would replace it with a regular file that its reader
// never sees.
class AtomicOutputFile {
 public:
  explicit AtomicOutputFile(const std::string& path);
  ~AtomicOutputFile();
  AtomicOutputFile(const AtomicOutputFile&) = delete;
  AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;

  OutputFile& file() { return *file_; }
  // Closes the temporary and renames it to PATH (in place: closes PATH). IoError naming the file and the reason
  // on either failure; the temporary is removed then too.
  void commit();
  const std::string& path() const { return path_; }
  // The temporary being written; empty when PATH is written in place.
  const std::string& temporary_path() const { return tmp_; }

 private:
  void discard();  // closes and removes the temporary
  std::string path_, tmp_;
  std::optional<AtomicFile> target_;  // empty when PATH is written in place
  std::optional<OutputFile> file_;
  bool committed_ = false;
};

// Writes a whole file through a temporary sibling and renames it into place.
void write_file_atomically(const std::string& path, std::string_view content);

}  // namespace parla

#pragma once
// A buffered output file whose every failure (unwritable directory, disk full) becomes an IoError naming the
// file, checked on write, flush and close, so no error passes silently into a half-written dataset.
#include <cstdio>
#include <string>
#include <string_view>

namespace parla::data {

class OutputFile {
 public:
  explicit OutputFile(const std::string& path);
  ~OutputFile();  // closes without checking; call close() to learn about errors
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  void write_line(std::string_view s);
  // Writes at an absolute position (for headers filled in at the end).
  void write_at(uint64_t offset, const void* data, size_t n);
  void close();
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(const char* what);
  std::FILE* f_ = nullptr;
  std::string path_;
};

// Writes a whole file through a temporary sibling and renames it into place.
void write_file_atomically(const std::string& path, std::string_view content);

}  // namespace parla::data

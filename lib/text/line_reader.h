#pragma once
// Streaming line input for corpora: plain text or gzip (zlib reads both through one interface), one line at a
// time, so memory does not grow with the corpus. Also finds corpus files by the Europarl release naming.
#include <cstdint>
#include <memory>
#include <string>

namespace parla::text {

class LineReader {
 public:
  // Throws DataError naming the file when it is missing or unreadable.
  explicit LineReader(const std::string& path);
  ~LineReader();
  LineReader(LineReader&&) noexcept;
  LineReader& operator=(LineReader&&) noexcept;

  // Reads the next line without its "\n" into `line`; false at the end of the file. Throws DataError on a read
  // error (a truncated or corrupt gzip stream), naming the file and line.
  bool next(std::string& line);
  // Lines returned so far (the 1-based number of the last one).
  uint64_t line_number() const { return line_number_; }
  const std::string& path() const { return path_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  uint64_t line_number_ = 0;
};

// The corpus file of one language: PREFIX.LANG, else PREFIX.LANG.gz (Europarl's europarl-v7.de-en.de).
// Throws DataError naming both candidates when neither exists.
std::string corpus_file(const std::string& prefix, const std::string& lang);

// CRC-32 (zlib's) and size of a file's bytes as stored, for provenance in meta.json.
struct FileChecksum {
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};
FileChecksum checksum_file(const std::string& path);

}  // namespace parla::text

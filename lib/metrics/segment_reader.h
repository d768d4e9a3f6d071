#pragma once
// Streams a hypothesis file and its reference files in lockstep, a batch of segments at a time, the way
// sacreBLEU's CLI reads them: UTF-8 (strict; a BOM is kept as text), lines split on "\n" only, each line
// rstrip()-ed with Python's Unicode whitespace, empty lines kept, no final newline needed. Plain or gzip input
// (zlib reads both); "-" is standard input. Memory is bounded by the batch, never by the corpus.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace parla::metrics {

// One open text stream, read line by line.
class LineStream {
 public:
  // Throws DataError naming the file when it is missing or unreadable. "-" reads standard input.
  explicit LineStream(std::string path);
  ~LineStream();
  LineStream(const LineStream&) = delete;
  LineStream& operator=(const LineStream&) = delete;

  // Next line without "\n" and rstripped; false at the end. Throws DataError naming the file and the 1-based line
  // on invalid UTF-8 or a read error.
  bool next(std::string& line);
  uint64_t lines_read() const { return lines_; }
  const std::string& path() const { return path_; }
  // The name used in messages: the path, or "<stdin>".
  std::string display_name() const;

 private:
  bool fill();
  std::string path_;
  void* gz_ = nullptr;  // gzFile
  std::vector<char> buf_;
  std::size_t pos_ = 0, end_ = 0;
  bool eof_ = false;
  uint64_t lines_ = 0;
};

struct SegmentBatch {
  std::vector<std::string> hyp;               // size() segments
  std::vector<std::vector<std::string>> refs;  // refs[r][i]
  std::size_t size() const { return hyp.size(); }
};

class ParallelSegmentReader {
 public:
  // Opens every file first, so a missing one is reported before any work. Throws DataError.
  ParallelSegmentReader(const std::string& hyp_path, const std::vector<std::string>& ref_paths);
  // Reads up to `max_segments` aligned segments into `batch`; false when nothing is left. Throws DataError when
  // the files have different line counts (naming every file and its count) or when the hypothesis has no lines.
  bool next_batch(std::size_t max_segments, SegmentBatch& batch);
  uint64_t segments_read() const { return hyp_->lines_read(); }
  std::size_t num_refs() const { return refs_.size(); }

 private:
  [[noreturn]] void throw_length_mismatch();
  std::unique_ptr<LineStream> hyp_;
  std::vector<std::unique_ptr<LineStream>> refs_;
  bool done_ = false;
};

}  // namespace parla::metrics

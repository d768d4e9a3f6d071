#include "metrics/segment_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <unistd.h>

#include "core/error.h"
#include "text/unicode.h"

namespace parla::metrics {

namespace {
constexpr std::size_t kBufferSize = 1 << 20;
}

LineStream::LineStream(std::string path) : path_(std::move(path)), buf_(kBufferSize) {
  if (path_ == "-") {
    int fd = ::dup(0);
    gz_ = fd >= 0 ? gzdopen(fd, "rb") : nullptr;
    if (!gz_) throw DataError("cannot read standard input");
  } else {
    gz_ = gzopen(path_.c_str(), "rb");
    if (!gz_) throw DataError("cannot open '" + path_ + "': " + std::strerror(errno ? errno : ENOENT));
  }
  gzbuffer(static_cast<gzFile>(gz_), 1 << 18);
}

LineStream::~LineStream() {
  if (gz_) gzclose(static_cast<gzFile>(gz_));
}

std::string LineStream::display_name() const { return path_ == "-" ? "<stdin>" : path_; }

bool LineStream::fill() {
  if (eof_) return false;
  if (pos_ > 0) {
    std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
    end_ -= pos_;
    pos_ = 0;
  }
  if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);  // a line longer than the buffer
  int n = gzread(static_cast<gzFile>(gz_), buf_.data() + end_, static_cast<unsigned>(buf_.size() - end_));
  if (n < 0) {
    int err = 0;
    const char* msg = gzerror(static_cast<gzFile>(gz_), &err);
    throw DataError("error reading '" + display_name() + "' after line " + std::to_string(lines_) + ": " +
                    (err == Z_ERRNO ? std::strerror(errno) : msg));
  }
  if (n == 0) eof_ = true;
  end_ += static_cast<std::size_t>(n);
  return n > 0;
}

bool LineStream::next(std::string& line) {
  while (true) {
    const char* start = buf_.data() + pos_;
    const void* nl = std::memchr(start, '\n', end_ - pos_);
    if (nl || (eof_ && pos_ < end_)) {
      std::size_t len = nl ? static_cast<const char*>(nl) - start : end_ - pos_;
      std::string_view raw(start, len);
      pos_ += nl ? len + 1 : len;
      ++lines_;
      std::size_t bad = text::find_invalid_utf8(raw);
      if (bad != std::string_view::npos)
        throw DataError("'" + display_name() + "' line " + std::to_string(lines_) +
                        ": invalid UTF-8 at byte " + std::to_string(bad + 1) + " of the line");
      line.assign(text::rstrip(raw));
      return true;
    }
    if (eof_) return false;
    fill();
  }
}

ParallelSegmentReader::ParallelSegmentReader(const std::string& hyp_path, const std::vector<std::string>& ref_paths) {
  if (ref_paths.empty()) throw UsageError("no reference file given");
  for (const auto& p : ref_paths) refs_.push_back(std::make_unique<LineStream>(p));
  hyp_ = std::make_unique<LineStream>(hyp_path);
}

void ParallelSegmentReader::throw_length_mismatch() {
  if (hyp_->lines_read() == 0)
    throw DataError("hypothesis '" + hyp_->display_name() + "' contains no lines (nothing to score)");
  // Count what is left so that the message gives every file's real line count.
  std::string line;
  while (hyp_->next(line)) {
  }
  for (auto& r : refs_)
    while (r->next(line)) {
    }
  std::string msg = "hypothesis and references have different numbers of lines: '" + hyp_->display_name() +
                    "' has " + std::to_string(hyp_->lines_read());
  for (const auto& r : refs_) msg += ", '" + r->display_name() + "' has " + std::to_string(r->lines_read());
  throw DataError(msg);
}

bool ParallelSegmentReader::next_batch(std::size_t max_segments, SegmentBatch& batch) {
  batch.hyp.resize(max_segments);
  batch.refs.resize(refs_.size());
  for (auto& r : batch.refs) r.resize(max_segments);
  std::size_t n = 0;
  while (!done_ && n < max_segments) {
    bool has_hyp = hyp_->next(batch.hyp[n]);
    for (std::size_t r = 0; r < refs_.size(); ++r) {
      if (refs_[r]->next(batch.refs[r][n]) != has_hyp) throw_length_mismatch();
    }
    if (!has_hyp) {
      done_ = true;
      break;
    }
    ++n;
  }
  if (done_ && hyp_->lines_read() == 0)
    throw DataError("hypothesis '" + hyp_->display_name() + "' contains no lines (nothing to score)");
  batch.hyp.resize(n);
  for (auto& r : batch.refs) r.resize(n);
  return n > 0;
}

}  // namespace parla::metrics

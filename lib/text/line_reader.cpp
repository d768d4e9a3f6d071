#include "text/line_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.h"

namespace parla::text {

struct LineReader::Impl {
  gzFile file = nullptr;
  std::vector<char> buffer = std::vector<char>(1 << 20);
  size_t pos = 0, end = 0;
  bool eof = false;
};

LineReader::LineReader(const std::string& path) : impl_(std::make_unique<Impl>()), path_(path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw DataError("file not found: '" + path + "'");
  if (std::filesystem::is_directory(path, ec)) throw DataError("'" + path + "' is a directory, not a text file");
  impl_->file = gzopen(path.c_str(), "rb");
  if (!impl_->file) throw DataError("cannot open '" + path + "': " + std::strerror(errno));
  gzbuffer(impl_->file, 1 << 20);
}

LineReader::~LineReader() {
  if (impl_ && impl_->file) gzclose(impl_->file);
}
LineReader::LineReader(LineReader&&) noexcept = default;
LineReader& LineReader::operator=(LineReader&&) noexcept = default;

bool LineReader::next(std::string& line) {
  line.clear();
  bool got_any = false;
  Impl& im = *impl_;
  for (;;) {
    if (im.pos == im.end) {
      if (im.eof) break;
      // Our own buffering instead of gzgets: lines may hold NUL bytes, and gzread reports truncated streams.
      int n = gzread(im.file, im.buffer.data(), static_cast<unsigned>(im.buffer.size()));
      if (n < 0) {
        int err = 0;
        const char* msg = gzerror(im.file, &err);
        throw DataError("'" + path_ + "', line " + std::to_string(line_number_ + 1) + ": read error: " + msg);
      }
      if (n == 0) {
        // A gzip stream cut short reads as a clean end unless the error state is checked.
        int err = 0;
        const char* msg = gzerror(im.file, &err);
        if (err != Z_OK && err != Z_STREAM_END)
          throw DataError("'" + path_ + "', line " + std::to_string(line_number_ + 1) + ": read error: " + msg);
        im.eof = true;
        break;
      }
      im.pos = 0;
      im.end = static_cast<size_t>(n);
    }
    got_any = true;
    const char* begin = im.buffer.data() + im.pos;
    const char* nl = static_cast<const char*>(std::memchr(begin, '\n', im.end - im.pos));
    if (nl) {
      line.append(begin, nl);
      im.pos += static_cast<size_t>(nl - begin) + 1;
      break;
    }
    line.append(begin, im.end - im.pos);
    im.pos = im.end;
  }
  if (!got_any) return false;
  ++line_number_;
  return true;
}

std::string corpus_file(const std::string& prefix, const std::string& lang) {
  std::string plain = prefix + "." + lang, gz = plain + ".gz";
  std::error_code ec;
  if (std::filesystem::exists(plain, ec)) return plain;
  if (std::filesystem::exists(gz, ec)) return gz;
  throw DataError("corpus file not found: neither '" + plain + "' nor '" + gz + "' exists");
}

FileChecksum checksum_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw DataError("cannot open '" + path + "': " + std::strerror(errno));
  std::vector<unsigned char> buf(1 << 20);
  FileChecksum c;
  uLong crc = crc32(0L, Z_NULL, 0);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    crc = crc32(crc, buf.data(), static_cast<uInt>(n));
    c.bytes += n;
  }
  bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) throw DataError("read error in '" + path + "'");
  c.crc32 = static_cast<uint32_t>(crc);
  return c;
}

}  // namespace parla::text

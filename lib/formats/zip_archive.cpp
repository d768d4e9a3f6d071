#include "formats/zip_archive.h"

#include <zip.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace parla::formats {

namespace {

zip_t* handle(void* z) { return static_cast<zip_t*>(z); }

std::string zip_reason(zip_error_t* e) {
  std::string s = zip_error_strerror(e);
  zip_error_fini(e);
  return s;
}

uint64_t le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

// Each entry's local header offset and CRC from the central directory (APPNOTE.TXT 4.3.12-4.3.16, with the Zip64
// records 4.3.14-4.3.15 and extra field 4.5.3), in the directory's order, which is libzip's index order. Empty where
// anything does not add up: the caller then copies entries out through libzip.
void central_directory(const uint8_t* d, size_t size, size_t count, std::vector<uint64_t>& offsets,
                       std::vector<uint32_t>& crcs) {
  if (size < 22) return;
  size_t eocd = size - 22;
  const size_t lowest = size > 22 + 65535 ? size - 22 - 65535 : 0;
  while (le(d + eocd, 4) != 0x06054b50) {
    if (eocd == lowest) return;
    --eocd;
  }
  uint64_t entries = le(d + eocd + 10, 2), at = le(d + eocd + 16, 4);
  if (entries == 0xFFFF || at == 0xFFFFFFFF) {
    if (eocd < 20 || le(d + eocd - 20, 4) != 0x07064b50) return;
    const uint64_t z = le(d + eocd - 20 + 8, 8);
    if (z > size || size - z < 56 || le(d + z, 4) != 0x06064b50) return;
    entries = le(d + z + 32, 8);
    at = le(d + z + 48, 8);
  }
  if (entries != count) return;
  std::vector<uint64_t> off;
  std::vector<uint32_t> crc;
  for (uint64_t i = 0; i < entries; ++i) {
    if (at > size || size - at < 46 || le(d + at, 4) != 0x02014b50) return;
    const uint64_t n = le(d + at + 28, 2), m = le(d + at + 30, 2), k = le(d + at + 32, 2);
    if (size - at - 46 < n + m + k) return;
    uint64_t usize = le(d + at + 24, 4), csize = le(d + at + 20, 4), local = le(d + at + 42, 4);
    // Zip64 extra field: the 8-byte values of whichever of these three are 0xFFFFFFFF, in this order.
    if (usize == 0xFFFFFFFF || csize == 0xFFFFFFFF || local == 0xFFFFFFFF) {
      const uint8_t* x = d + at + 46 + n;
      const uint8_t* end = x + m;
      bool found = false;
      while (end - x >= 4) {
        const uint64_t id = le(x, 2), len = le(x + 2, 2);
        if (static_cast<uint64_t>(end - x - 4) < len) return;
        if (id == 1) {
          const uint8_t* v = x + 4;
          const uint8_t* v_end = v + len;
          for (uint64_t* field : {&usize, &csize, &local}) {
            if (*field != 0xFFFFFFFF) continue;
            if (v_end - v < 8) return;
            *field = le(v, 8);
            v += 8;
          }
          found = true;
          break;
        }
        x += 4 + len;
      }
      if (!found) return;
    }
    off.push_back(local);
    crc.push_back(static_cast<uint32_t>(le(d + at + 16, 4)));
    at += 46 + n + m + k;
  }
  offsets = std::move(off);
  crcs = std::move(crc);
}

}  // namespace

ZipArchive::ZipArchive(const uint8_t* data, size_t size) : data_(data), size_(size) {
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* source = zip_source_buffer_create(data, size, 0, &error);
  if (!source) throw DataError("cannot read as a zip archive: " + zip_reason(&error));
  // ZIP_CHECKCONS: the local headers must agree with the central directory (a file edited to say two different
  // things to two readers is refused).
  zip_t* z = zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &error);
  if (!z) {
    zip_source_free(source);
    throw DataError("not a zip archive, or a damaged one (" + zip_reason(&error) + ")");
  }
  zip_ = z;
  const zip_int64_t n = zip_get_num_entries(z, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(z, static_cast<zip_uint64_t>(i), 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) ||
        !(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_SIZE) || !(st.valid & ZIP_STAT_COMP_METHOD)) {
      zip_discard(z);
      zip_ = nullptr;
      throw DataError("damaged zip archive: entry " + std::to_string(i) + " cannot be read");
    }
    entries_.push_back({st.name, st.size, st.comp_size, st.comp_method == ZIP_CM_STORE});
  }
  central_directory(data, size, entries_.size(), local_headers_, crcs_);
}

ZipArchive::~ZipArchive() {
  if (zip_) zip_discard(handle(zip_));  // read-only: nothing to write back
}

std::optional<size_t> ZipArchive::find(const std::string& name) const {
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].name == name) return i;
  return std::nullopt;
}

std::string ZipArchive::read(size_t index, uint64_t max_bytes) const {
  const Entry& e = entries_.at(index);
  if (e.size > max_bytes)
    throw DataError("zip entry '" + e.name + "' declares " + std::to_string(e.size) + " bytes, more than the " +
                    std::to_string(max_bytes) + " it may hold");
  zip_file_t* f = zip_fopen_index(handle(zip_), index, 0);
  if (!f)
    throw DataError("zip entry '" + e.name + "' cannot be opened (" +
                    std::string(zip_strerror(handle(zip_))) + ")");
  std::string out(static_cast<size_t>(e.size), '\0');
  uint64_t got = 0;
  while (got < e.size) {
    const zip_int64_t r = zip_fread(f, out.data() + got, e.size - got);
    if (r <= 0) break;
    got += static_cast<uint64_t>(r);
  }
  // One more read must find the end: a CRC mismatch or an entry longer than declared shows up here.
  char extra;
  const zip_int64_t tail = got == e.size ? zip_fread(f, &extra, 1) : -1;
  std::string why = tail != 0 ? zip_file_strerror(f) : "";
  zip_fclose(f);
  if (got != e.size || tail != 0)
    throw DataError("zip entry '" + e.name + "' is damaged (" + std::to_string(got) + " of " +
                    std::to_string(e.size) + " bytes read" + (why.empty() ? "" : ": " + why) + ")");
  return out;
}

std::optional<std::string_view> ZipArchive::stored_bytes(size_t index, uint64_t max_bytes) const {
  const Entry& e = entries_.at(index);
  if (e.size > max_bytes)
    throw DataError("zip entry '" + e.name + "' declares " + std::to_string(e.size) + " bytes, more than the " +
                    std::to_string(max_bytes) + " it may hold");
  if (!e.stored || e.compressed_size != e.size || index >= local_headers_.size()) return std::nullopt;
  // The local header (APPNOTE.TXT 4.3.7): its name and extra field lengths place the data.
  const uint64_t at = local_headers_[index];
  if (at > size_ || size_ - at < 30 || le(data_ + at, 4) != 0x04034b50) return std::nullopt;
  const uint64_t n = le(data_ + at + 26, 2), m = le(data_ + at + 28, 2);
  const uint64_t begin = at + 30 + n + m;
  if (n != e.name.size() || std::memcmp(data_ + at + 30, e.name.data(), n) != 0 || begin > size_ ||
      size_ - begin < e.size)
    return std::nullopt;
  const char* bytes = reinterpret_cast<const char*>(data_ + begin);
  uLong crc = crc32(0L, Z_NULL, 0);
  for (uint64_t done = 0; done < e.size;) {  // zlib takes the length as a 32-bit uInt
    const auto chunk = static_cast<uInt>(std::min<uint64_t>(e.size - done, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes + done), chunk);
    done += chunk;
  }
  if (static_cast<uint32_t>(crc) != crcs_[index])
    throw DataError("zip entry '" + e.name + "' is damaged (CRC mismatch)");
  return std::string_view(bytes, static_cast<size_t>(e.size));
}

}  // namespace parla::formats

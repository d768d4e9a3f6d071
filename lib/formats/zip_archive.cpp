#include "formats/zip_archive.h"

#include <zip.h>

#include "core/error.h"

namespace parla::formats {

namespace {

zip_t* handle(void* z) { return static_cast<zip_t*>(z); }

std::string zip_reason(zip_error_t* e) {
  std::string s = zip_error_strerror(e);
  zip_error_fini(e);
  return s;
}

}  // namespace

ZipArchive::ZipArchive(const uint8_t* data, size_t size) {
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

}  // namespace parla::formats

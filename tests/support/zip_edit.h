#pragma once
// Rewrites one entry of a zip archive in place (libzip), the way someone editing a downloaded .pt file would:
// for the hostile-file tests of the checkpoint readers.
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>

#include <zip.h>

namespace parla::testing {

// The entry whose name ends with `suffix` becomes edit(its content), stored uncompressed.
inline void edit_zip_entry(const std::string& path, const std::string& suffix,
                           const std::function<std::string(std::string)>& edit) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), 0, &err);
  if (!z) throw std::runtime_error("cannot open " + path + " as a zip");
  zip_int64_t index = -1;
  std::string name;
  for (zip_int64_t i = 0; i < zip_get_num_entries(z, 0); ++i) {
    name = zip_get_name(z, static_cast<zip_uint64_t>(i), 0);
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      index = i;
      break;
    }
  }
  if (index < 0) throw std::runtime_error(path + " has no entry ending in " + suffix);
  zip_stat_t st;
  zip_stat_index(z, static_cast<zip_uint64_t>(index), 0, &st);
  std::string content(st.size, '\0');
  zip_file_t* f = zip_fopen_index(z, static_cast<zip_uint64_t>(index), 0);
  zip_fread(f, content.data(), st.size);
  zip_fclose(f);
  const std::string edited = edit(content);
  void* copy = std::malloc(edited.size() + 1);
  std::memcpy(copy, edited.data(), edited.size());
  zip_source_t* src = zip_source_buffer(z, copy, edited.size(), /*freep=*/1);
  if (!src || zip_file_replace(z, static_cast<zip_uint64_t>(index), src, 0) != 0)
    throw std::runtime_error("cannot replace " + name + " in " + path);
  zip_set_file_compression(z, static_cast<zip_uint64_t>(index), ZIP_CM_STORE, 0);
  if (zip_close(z) != 0) throw std::runtime_error("cannot write " + path);
}

// Adds entry `name` with `content` (stored), replacing one of that name.
inline void set_zip_entry(const std::string& path, const std::string& name, const std::string& content) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), 0, &err);
  if (!z) throw std::runtime_error("cannot open " + path + " as a zip");
  void* copy = std::malloc(content.size() + 1);
  std::memcpy(copy, content.data(), content.size());
  zip_source_t* src = zip_source_buffer(z, copy, content.size(), /*freep=*/1);
  const zip_int64_t index = src ? zip_file_add(z, name.c_str(), src, ZIP_FL_OVERWRITE) : -1;
  if (index < 0) throw std::runtime_error("cannot add " + name + " to " + path);
  zip_set_file_compression(z, static_cast<zip_uint64_t>(index), ZIP_CM_STORE, 0);
  if (zip_close(z) != 0) throw std::runtime_error("cannot write " + path);
}

// The name of the first entry that ends with `suffix`.
inline std::string zip_entry_name(const std::string& path, const std::string& suffix) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY, &err);
  if (!z) throw std::runtime_error("cannot open " + path + " as a zip");
  std::string found;
  for (zip_int64_t i = 0; i < zip_get_num_entries(z, 0) && found.empty(); ++i) {
    std::string name = zip_get_name(z, static_cast<zip_uint64_t>(i), 0);
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      found = name;
  }
  zip_discard(z);
  return found;
}

// The content of the entry whose name ends with `suffix`.
inline std::string read_zip_entry(const std::string& path, const std::string& suffix) {
  std::string out;
  edit_zip_entry(path, suffix, [&](std::string s) {
    out = s;
    return s;
  });
  return out;
}

}  // namespace parla::testing

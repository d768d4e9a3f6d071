#include "convert/hf_folder_writer.h"

#include "core/error.h"
#include "core/output_file.h"

namespace parla::convert {

namespace fs = std::filesystem;

namespace {
const std::string& absent(const std::string& out) {
  if (fs::exists(out)) throw UsageError(out + ": exists; give a folder that does not exist yet");
  return out;
}
}  // namespace

HfFolderWriter::HfFolderWriter(const std::string& out) : out_(absent(out)), folder_(out, staging_path(out)) {
  const fs::path tmp = folder_.temporary();
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec)) throw IoError(tmp.string() + ": cannot create (" + ec.message() + ")");
}

std::string HfFolderWriter::file(const std::string& name) const { return (fs::path(folder_.temporary()) / name).string(); }

void HfFolderWriter::text(const std::string& name, const std::string& content) const {
  OutputFile f(file(name));
  f.write(content);
  f.close();
}

void HfFolderWriter::commit() {
  if (const auto ec = folder_.commit())
    throw IoError(out_ + ": cannot rename the finished folder into place (" + ec.message() + ")");
}

}  // namespace parla::convert

#pragma once
// An exported Hugging Face folder, written whole or not at all: the files go into a temporary sibling folder
// (core/atomic_file.h), renamed into place by commit(); destroyed before that, it is removed.
#include <filesystem>
#include <string>

#include "core/atomic_file.h"

namespace parla::convert {

class HfFolderWriter {
 public:
  // UsageError when `out` exists; IoError when the temporary folder cannot be made.
  explicit HfFolderWriter(const std::string& out);
  // The path of file `name` in the temporary folder.
  std::string file(const std::string& name) const;
  void text(const std::string& name, const std::string& content) const;
  // IoError when the rename fails.
  void commit();

 private:
  std::string out_;
  AtomicFile folder_;
};

}  // namespace parla::convert

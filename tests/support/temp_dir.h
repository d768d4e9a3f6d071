#pragma once
// A fresh scratch folder under PARLA_TEST_TMP_DIR for one test, removed when the test ends.
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace parla::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& name) {
    std::random_device rd;
    path_ = std::filesystem::path(PARLA_TEST_TMP_DIR) / (name + "-" + std::to_string(rd()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string write(const std::string& name, const std::string& content) const {
    std::ofstream(file(name), std::ios::binary) << content;
    return file(name);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace parla::testing

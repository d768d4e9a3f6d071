#include "data/output_file.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <limits>

#include <spdlog/spdlog.h>

#include "core/error.h"

namespace parla::data {

namespace {

// strerror of a captured errno; a failure that left none (a stream error without a system call) still reads.
std::string reason(int e) { return e != 0 ? std::strerror(e) : "unknown error"; }

namespace fs = std::filesystem;

constexpr std::string_view kTmp = ".tmp";

// A path that exists and that a rename must not replace: a FIFO, a device or a socket. A directory is left to
// the rename, which refuses it with a message naming both paths.
bool written_in_place(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

// The PID of a temporary name OWNER.tmp.<pid>, or 0 when `name` is no such name; `owner` gets OWNER.
pid_t temporary_pid(std::string_view name, std::string_view& owner) {
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot < kTmp.size() || name.substr(dot - kTmp.size(), kTmp.size()) != kTmp)
    return 0;
  const std::string_view digits = name.substr(dot + 1);
  long long pid = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || pid <= 0 ||
      pid > std::numeric_limits<pid_t>::max())
    return 0;
  owner = name.substr(0, dot - kTmp.size());
  return static_cast<pid_t>(pid);
}

// kill(pid, 0) delivers nothing; ESRCH means no such process (EPERM: one that belongs to someone else).
bool process_gone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

}  // namespace

std::string temporary_path(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

OutputFile::OutputFile(const std::string& path, Mode mode) : path_(path), name_("'" + path + "'") {
  f_ = std::fopen(path.c_str(), mode == Mode::append ? "ab" : "wb");
  if (!f_) throw IoError("cannot create " + name_ + ": " + reason(errno));
  std::setvbuf(f_, nullptr, _IOFBF, 1 << 20);
}

OutputFile::OutputFile(std::FILE* stream, std::string name)
    : f_(stream), owned_(false), name_(std::move(name)) {}

OutputFile::~OutputFile() {
  if (f_ && owned_) std::fclose(f_);
}

// errno is read first: fclose below, or anything else, may overwrite the reason the failing call left.
void OutputFile::fail(const char* what) {
  int e = errno;
  if (f_ && owned_) std::fclose(f_);
  f_ = nullptr;
  throw IoError(std::string("cannot ") + what + " " + name_ + ": " + reason(e));
}

void OutputFile::write(const void* data, size_t n) {
  if (!f_) throw IoError("write to closed file " + name_);
  errno = 0;
  if (n && std::fwrite(data, 1, n, f_) != n) fail("write");
}

void OutputFile::write_line(std::string_view s) {
  write(s);
  write("\n", 1);
}

void OutputFile::write_at(uint64_t offset, const void* data, size_t n) {
  if (!f_) throw IoError("write to closed file " + name_);
  long here = std::ftell(f_);
  if (here < 0 || std::fseek(f_, static_cast<long>(offset), SEEK_SET) != 0) fail("seek in");
  write(data, n);
  if (std::fseek(f_, here, SEEK_SET) != 0) fail("seek in");
}

void OutputFile::flush() {
  if (!f_) throw IoError("write to closed file " + name_);
  errno = 0;
  if (std::fflush(f_) != 0) fail("write");
}

void OutputFile::close() {
  if (!f_) return;
  flush();
  std::FILE* f = f_;
  f_ = nullptr;
  if (!owned_) return;
  errno = 0;
  if (std::fclose(f) != 0) {
    int e = errno;
    throw IoError("cannot write " + name_ + ": " + reason(e));
  }
}

AtomicOutputFile::AtomicOutputFile(const std::string& path)
    : path_(path), tmp_(written_in_place(path) ? std::string() : data::temporary_path(path)) {
  file_.emplace(tmp_.empty() ? path_ : tmp_);
}

AtomicOutputFile::~AtomicOutputFile() {
  if (!committed_) discard();
}

void AtomicOutputFile::discard() {
  file_.reset();  // closed before it is removed
  if (tmp_.empty()) return;  // written in place: what was written stays with its reader
  std::error_code ec;
  std::filesystem::remove(tmp_, ec);
}

void AtomicOutputFile::commit() {
  try {
    file_->close();
  } catch (...) {
    discard();
    throw;
  }
  if (tmp_.empty()) {
    committed_ = true;
    return;
  }
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) {
    discard();
    throw IoError("cannot rename '" + tmp_ + "' to '" + path_ + "': " + ec.message());
  }
  committed_ = true;
}

void write_file_atomically(const std::string& path, std::string_view content) {
  AtomicOutputFile f(path);
  f.file().write(content);
  f.commit();
}

void copy_file_atomically(const std::string& from, const std::string& to) {
  const std::string tmp = temporary_path(to);
  std::error_code ec;
  fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
  if (!ec) fs::rename(tmp, to, ec);
  if (ec) {
    std::string why = ec.message();
    fs::remove(tmp, ec);
    throw IoError("cannot write '" + to + "' (temporary '" + tmp + "'): " + why);
  }
}

std::vector<std::string> remove_stale_temporaries(const std::string& path_or_dir) {
  std::error_code ec;
  const bool folder = fs::is_directory(path_or_dir, ec);
  const fs::path dir = folder ? fs::path(path_or_dir) : fs::path(path_or_dir).parent_path();
  const std::string file = folder ? std::string() : fs::path(path_or_dir).filename().string();
  std::vector<std::string> removed;
  fs::directory_iterator it(dir.empty() ? fs::path(".") : dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::directory_entry& e = *it;
    std::error_code type_ec;
    if (!e.is_regular_file(type_ec) || e.is_symlink(type_ec)) continue;
    const std::string name = e.path().filename().string();
    std::string_view owner;
    const pid_t pid = temporary_pid(name, owner);
    bool stale = false;
    if (pid != 0) {
      stale = (folder || owner == file) && process_gone(pid);
    } else if (ends_with(name, kTmp)) {
      const std::string_view of = std::string_view(name).substr(0, name.size() - kTmp.size());
      stale = folder ? ends_with(of, ".pt") || ends_with(of, ".json") : of == file;
    }
    if (!stale) continue;
    std::error_code rm;
    fs::remove(e.path(), rm);
    if (rm) {
      spdlog::warn("cannot remove the stale temporary '{}': {}", e.path().string(), rm.message());
      continue;
    }
    spdlog::info("removed '{}', left by a writer that did not finish{}", e.path().string(),
                 pid != 0 ? " (process " + std::to_string(pid) + " is gone)" : std::string());
    removed.push_back(e.path().string());
  }
  return removed;
}

}  // namespace parla::data

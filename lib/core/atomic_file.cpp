#include "core/atomic_file.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <deque>
#include <filesystem>
#include <limits>
#include <string_view>

#include <spdlog/spdlog.h>

#include "core/error.h"

namespace fs = std::filesystem;

namespace parla {

namespace {

constexpr std::string_view kTmp = ".tmp";

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

std::string staging_path(const std::string& path) { return path + ".tmp-" + std::to_string(::getpid()); }

AtomicFile::AtomicFile(std::string path, std::string temporary) : path_(std::move(path)), tmp_(std::move(temporary)) {}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

std::error_code AtomicFile::commit() {
  std::error_code ec;
  fs::rename(tmp_, path_, ec);
  if (ec) {
    discard();
    return ec;
  }
  committed_ = true;
  return {};
}

void copy_file_atomically(const std::string& from, const std::string& to) {
  AtomicFile out(to, temporary_path(to));
  std::error_code ec;
  fs::copy_file(from, out.temporary(), fs::copy_options::overwrite_existing, ec);
  if (!ec) ec = out.commit();
  if (ec) throw IoError("cannot write '" + to + "' (temporary '" + out.temporary() + "'): " + ec.message());
}

std::error_code copy_files_atomically(const std::vector<std::pair<std::string, std::string>>& from_to,
                                      std::string& failed_to) {
  std::deque<AtomicFile> outs;  // not movable: a deque builds them in place
  for (const auto& [from, to] : from_to) outs.emplace_back(to, staging_path(to));
  std::error_code ec;
  for (size_t i = 0; i < from_to.size(); ++i) {
    fs::copy_file(from_to[i].first, outs[i].temporary(), fs::copy_options::overwrite_existing, ec);
    if (ec) {
      failed_to = from_to[i].second;
      return ec;  // every temporary is removed as `outs` goes
    }
  }
  for (size_t i = 0; i < outs.size(); ++i)
    if ((ec = outs[i].commit())) {
      failed_to = from_to[i].second;
      return ec;
    }
  return {};
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

}  // namespace parla

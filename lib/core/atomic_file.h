#pragma once
// Every output parla writes appears whole or not at all: it is built under a temporary name beside its final path
// (the same folder, hence the same file system) and renamed into place when complete, an atomic step in POSIX.
// A failure on the way removes the temporary; a writer killed mid-write (SIGKILL, power loss) leaves one that
// the next run's remove_stale_temporaries takes away. The one implementation of write-then-rename: checkpoints,
// datasets, exported folders, translations, logs' config.json and copies all go through it.
#include <string>
#include <utility>
#include <system_error>
#include <vector>

namespace parla {

// The temporary sibling a writer of the file PATH uses: PATH.tmp.<pid>. The PID keeps concurrent writers apart and
// lets remove_stale_temporaries tell a dead writer's leftovers from a live one's.
std::string temporary_path(const std::string& path);
// The temporary sibling of a folder, or of files that are written together: PATH.tmp-<pid> (a dataset, an exported
// model, the two sides of an aligned text).
std::string staging_path(const std::string& path);

// PATH built as `temporary` and renamed into place by commit(). Destroyed without a commit (an error on the way),
// it removes the temporary, a folder with everything in it.
class AtomicFile {
 public:
  AtomicFile(std::string path, std::string temporary);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::string& path() const { return path_; }
  const std::string& temporary() const { return tmp_; }
  // Renames the temporary to PATH. Returns the rename's error, having removed the temporary then, so the caller
  // words the IoError (each names what it writes).
  std::error_code commit();
  // Removes the temporary now (nothing once committed).
  void discard();

 private:
  std::string path_, tmp_;
  bool committed_ = false;
};

// Copies FROM to TO through TO's temporary sibling, renamed into place: TO is whole or untouched. IoError naming
// TO, the temporary and the reason; the temporary is removed then.
void copy_file_atomically(const std::string& from, const std::string& to);

// Copies each FROM to its TO so that either every TO is written or none is changed: all are copied to their
// temporaries (staging_path) before any is renamed. On a failure the temporaries are removed and the error is
// returned with the TO it concerns.
std::error_code copy_files_atomically(const std::vector<std::pair<std::string, std::string>>& from_to,
                                      std::string& failed_to);

// Removes what writers killed mid-write (SIGKILL, power loss) left for good: for a file PATH, its temporaries
// PATH.tmp.<pid> whose process is gone (kill(pid, 0) fails with ESRCH) and the fixed-name PATH.tmp that parla
// used before temporaries carried the PID; for a folder, the PID-named temporaries of every file in it and the
// fixed-name ones of parla's own outputs there (NAME.pt.tmp, NAME.json.tmp). Temporaries of running processes
// (this one's included) and every other file are kept; a missing path or folder is nothing to do. Each removal is
// logged; one that fails is a warning, never an error. Returns the paths removed.
std::vector<std::string> remove_stale_temporaries(const std::string& path_or_dir);

}  // namespace parla

// Write-then-rename (core/atomic_file.h): a path is whole or untouched, temporaries of dead writers are removed.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "support/files.h"
#include "support/run.h"
#include "support/temp_dir.h"

using Catch::Contains;
using parla::testing::TempDir;
namespace fs = std::filesystem;

using parla::testing::dead_pid;
using parla::testing::read_file;

namespace {
size_t entries(const TempDir& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()));
}
}  // namespace

TEST_CASE("a file or folder built under its temporary appears only on commit, and is removed without one") {
  TempDir dir("atomic-file");
  const std::string pid = std::to_string(::getpid());
  CHECK(parla::temporary_path("a/b.pt") == "a/b.pt.tmp." + pid);
  CHECK(parla::staging_path("data") == "data.tmp-" + pid);

  const std::string out = dir.file("out.txt");
  {
    parla::AtomicFile f(out, parla::temporary_path(out));
    dir.write("out.txt.tmp." + pid, "whole");
    CHECK_FALSE(fs::exists(out));
    CHECK_FALSE(f.commit());
  }
  CHECK(read_file(out) == "whole");
  CHECK(entries(dir) == 1);

  const std::string folder = dir.file("dataset");
  {
    parla::AtomicFile f(folder, parla::staging_path(folder));
    fs::create_directories(f.temporary());
    dir.write("dataset.tmp-" + pid + "/meta.json", "{}");
  }  // an error on the way: no commit
  CHECK_FALSE(fs::exists(folder));
  CHECK(entries(dir) == 1);

  {
    parla::AtomicFile f(folder, parla::staging_path(folder));
    fs::create_directories(f.temporary() + "/meta.json");
    fs::create_directories(folder + "/x");  // a non-empty folder in the way: the rename fails
    auto ec = f.commit();
    CHECK(ec);
    CHECK_FALSE(fs::exists(f.temporary()));
  }
}

TEST_CASE("files copied together are all written or none is") {
  TempDir dir("atomic-file-pair");
  const std::string a = dir.write("a", "A"), b = dir.write("b", "B");
  std::string failed;
  CHECK_FALSE(parla::copy_files_atomically({{a, dir.file("out.a")}, {b, dir.file("out.b")}}, failed));
  CHECK(read_file(dir.file("out.a")) == "A");
  CHECK(read_file(dir.file("out.b")) == "B");

  auto ec = parla::copy_files_atomically({{a, dir.file("new.a")}, {dir.file("missing"), dir.file("new.b")}}, failed);
  CHECK(ec);
  CHECK(failed == dir.file("new.b"));
  CHECK_FALSE(fs::exists(dir.file("new.a")));  // the first was copied, never renamed, and its temporary is gone
  CHECK(entries(dir) == 4);
}

TEST_CASE("stale temporaries of dead writers are removed, live writers' and unrelated files are kept") {
  TempDir dir("atomic-file");
  const std::string dead = std::to_string(dead_pid()), live = std::to_string(::getpid());
  const std::string out = dir.write("out.txt", "old\n");
  const std::string stale = dir.write("out.txt.tmp." + dead, "half");
  const std::string legacy = dir.write("out.txt.tmp", "half");  // parla before temporaries carried the PID
  const std::string running = dir.write("out.txt.tmp." + live, "being written");
  const std::string other_stale = dir.write("other.txt.tmp." + dead, "not out.txt's");
  const std::string unrelated[] = {dir.write("out.txt.tmp.12x", ""), dir.write("out.txt.tmpl", ""),
                                   dir.write("notes.tmp", ""), dir.write("out.txt.bak", "")};

  auto removed = parla::remove_stale_temporaries(out);
  std::sort(removed.begin(), removed.end());
  CHECK(removed == std::vector<std::string>{legacy, stale});
  CHECK_FALSE(fs::exists(stale));
  CHECK_FALSE(fs::exists(legacy));
  CHECK(read_file(out) == "old\n");
  CHECK(fs::exists(running));
  CHECK(fs::exists(other_stale));  // another file's temporary: not this path's to remove
  for (const auto& f : unrelated) CHECK(fs::exists(f));

  // A path whose folder is missing, or a path without temporaries: nothing to do.
  CHECK(parla::remove_stale_temporaries(dir.file("missing/out.txt")).empty());
  CHECK(parla::remove_stale_temporaries(out).empty());
}

TEST_CASE("stale temporaries in a folder: every file's dead-PID temporaries and parla's own fixed-name ones") {
  TempDir dir("atomic-file");
  const std::string dead = std::to_string(dead_pid()), live = std::to_string(::getpid());
  const std::string gone[] = {dir.write("checkpoint_last.pt.tmp." + dead, "half"),
                              dir.write("config.json.tmp." + dead, "{"),
                              dir.write("checkpoint_500.pt.tmp", "half"),  // the numbered copies' old fixed name
                              dir.write("config.json.tmp", "{")};
  const std::string kept[] = {dir.write("checkpoint_last.pt", "whole"), dir.write("checkpoint_best.pt.tmp." + live, ""),
                              dir.write("notes.tmp", "a user's"), dir.write("metrics.jsonl", "{}\n")};
  fs::create_directories(dir.file("sub.tmp." + dead));  // folders are not temporaries of a file

  auto removed = parla::remove_stale_temporaries(dir.path().string());
  CHECK(removed.size() == 4);
  for (const auto& f : gone) CHECK_FALSE(fs::exists(f));
  for (const auto& f : kept) CHECK(fs::exists(f));
  CHECK(fs::is_directory(dir.file("sub.tmp." + dead)));
}

TEST_CASE("copy_file_atomically copies through a PID-named temporary and leaves none") {
  TempDir dir("atomic-file");
  const std::string from = dir.write("checkpoint_last.pt", "weights");
  parla::copy_file_atomically(from, dir.file("checkpoint_7.pt"));
  CHECK(read_file(dir.file("checkpoint_7.pt")) == "weights");
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 2);
  CHECK_THROWS_WITH(parla::copy_file_atomically(dir.file("missing.pt"), dir.file("checkpoint_8.pt")),
                    Contains(dir.file("checkpoint_8.pt")) && Contains(".tmp." + std::to_string(::getpid())));
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 2);
}

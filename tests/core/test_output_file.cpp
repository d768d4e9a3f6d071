// Output files: every write failure names the file and the system's reason; atomic files are whole or absent.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/output_file.h"
#include "support/files.h"
#include "support/run.h"
#include "support/temp_dir.h"

using Catch::Contains;
using parla::AtomicOutputFile;
using parla::OutputFile;
using parla::testing::TempDir;
namespace fs = std::filesystem;

using parla::testing::dead_pid;
using parla::testing::read_file;

TEST_CASE("a write that fails names the file and the system's reason") {
  // /dev/full accepts the open and refuses every write with ENOSPC, as a full disk does.
  OutputFile full("/dev/full");
  full.write_line("a line");  // buffered: the failure shows on flush or close
  CHECK_THROWS_WITH(full.close(), Contains("'/dev/full'") && Contains("No space left on device"));

  OutputFile flushed("/dev/full");
  flushed.write("x");
  CHECK_THROWS_AS(flushed.flush(), parla::IoError);

  TempDir dir("output-file");
  CHECK_THROWS_WITH(OutputFile(dir.file("no-such-dir/f.txt")),
                    Contains(dir.file("no-such-dir/f.txt")) && Contains("No such file or directory"));
}

TEST_CASE("a borrowed stream is named as given and left open") {
  std::FILE* f = std::fopen("/dev/full", "wb");
  REQUIRE(f != nullptr);
  {
    OutputFile out(f, "standard output");
    out.write("translation\n");
    CHECK_THROWS_WITH(out.flush(), Contains("standard output") && Contains("No space left on device"));
  }
  TempDir dir("output-file");
  std::FILE* g = std::fopen(dir.file("borrowed.txt").c_str(), "wb");
  REQUIRE(g != nullptr);
  {
    OutputFile out(g, "standard output");
    out.write("one\n");
    out.close();  // flushes, does not close
  }
  CHECK(std::fputs("two\n", g) >= 0);  // still open: the owner closes it
  CHECK(std::fclose(g) == 0);
  CHECK(read_file(dir.file("borrowed.txt")) == "one\ntwo\n");
  std::fclose(f);
}

TEST_CASE("append mode adds to an existing file") {
  TempDir dir("output-file");
  std::string p = dir.write("log.jsonl", "{\"a\":1}\n");
  OutputFile out(p, OutputFile::Mode::append);
  out.write_line("{\"b\":2}");
  out.close();
  CHECK(read_file(p) == "{\"a\":1}\n{\"b\":2}\n");
}

TEST_CASE("an atomic output file is whole after commit and leaves neither file nor temporary when it fails") {
  TempDir dir("output-file");
  const std::string p = dir.file("out.txt");
  {
    AtomicOutputFile out(p);
    CHECK(out.temporary_path() == p + ".tmp." + std::to_string(::getpid()));
    out.file().write("whole\n");
    CHECK_FALSE(fs::exists(p));  // nothing under the final name until commit
    out.commit();
  }
  CHECK(read_file(p) == "whole\n");
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);  // no temporary

  // An error on the way (the object destroyed without commit): the old file stays, the temporary goes.
  try {
    AtomicOutputFile out(p);
    out.file().write("half");
    throw std::runtime_error("translation failed");
  } catch (const std::runtime_error&) {
  }
  CHECK(read_file(p) == "whole\n");
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);

  parla::write_file_atomically(dir.file("meta.json"), "{}\n");
  CHECK(read_file(dir.file("meta.json")) == "{}\n");
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 2);
}

TEST_CASE("an atomic output file whose rename fails names both paths and removes the temporary") {
  TempDir dir("output-file");
  fs::create_directories(dir.file("taken/inside"));  // a non-empty directory cannot be replaced by a file
  AtomicOutputFile out(dir.file("taken"));
  out.file().write("x");
  CHECK_THROWS_WITH(out.commit(), Contains(out.temporary_path()) && Contains(dir.file("taken")));
  CHECK(fs::is_directory(dir.file("taken/inside")));
  CHECK_FALSE(fs::exists(out.temporary_path()));
}

TEST_CASE("an atomic output file to a FIFO writes in place, so the FIFO's reader gets every byte") {
  TempDir dir("output-file");
  const std::string fifo = dir.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Held open for writing until the end, so that the reader's open never blocks and it sees the end of the data
  // even if the FIFO were replaced by a renamed file (the test then fails instead of hanging).
  const int holder = ::open(fifo.c_str(), O_RDWR);
  REQUIRE(holder >= 0);
  std::string received;
  std::promise<void> opened;
  std::thread reader([&] {
    std::ifstream in(fifo, std::ios::binary);
    opened.set_value();
    received.assign(std::istreambuf_iterator<char>(in), {});
  });
  opened.get_future().wait();  // a reader that opened after the holder closed would wait for a writer forever
  {
    AtomicOutputFile out(fifo);
    CHECK(out.temporary_path().empty());
    for (int i = 0; i < 10000; ++i) out.file().write_line("line " + std::to_string(i));  // more than a pipe holds
    out.commit();
  }
  ::close(holder);
  reader.join();
  CHECK(received.size() > 65536);
  CHECK(received.substr(0, 14) == "line 0\nline 1\n");
  CHECK(received.substr(received.size() - 10) == "line 9999\n");
  struct stat st;
  REQUIRE(::stat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));  // still the FIFO, not a regular file renamed over it
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);
}

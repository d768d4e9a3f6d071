// Files that are not regular files (a FIFO, a device, a folder) are refused before anything waits on them: opening a
// FIFO for reading blocks until a writer comes, so a model path that names one hung the program for good. A guard
// thread plays the writer after a few seconds, so that a regression fails the test instead of hanging it.
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/regular_file.h"
#include "formats/bounded_file.h"
#include "formats/mapped_file.h"
#include "support/temp_dir.h"
#include "text/sentencepiece_vocab.h"

namespace {

// Runs `open`, which must throw a DataError naming `path` at once; a blocked open is released after 5 s by opening
// the FIFO for writing, and then fails the test.
void refused_without_waiting(const std::string& path, const std::function<void()>& open) {
  std::mutex m;
  std::condition_variable cv;
  bool done = false, rescued = false;
  std::thread guard([&] {
    std::unique_lock<std::mutex> lock(m);
    if (cv.wait_for(lock, std::chrono::seconds(5), [&] { return done; })) return;
    rescued = true;
    const int w = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (w >= 0) ::close(w);
  });
  std::string message;
  try {
    open();
  } catch (const parla::DataError& e) {
    message = e.what();
  }
  {
    std::lock_guard<std::mutex> lock(m);
    done = true;
  }
  cv.notify_one();
  guard.join();
  CHECK_FALSE(rescued);
  CHECK(message.find(path) != std::string::npos);
  CHECK(message.find("not a regular file") != std::string::npos);
}

}  // namespace

TEST_CASE("a FIFO is refused unopened by the mapped and the bounded readers") {
  parla::testing::TempDir dir("fifo");
  const std::string fifo = dir.file("model.safetensors");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  refused_without_waiting(fifo, [&] { parla::formats::MappedFile::open(fifo); });
  refused_without_waiting(fifo, [&] { parla::formats::read_bounded_file(fifo, 1 << 20); });
  struct stat st {};
  refused_without_waiting(fifo, [&] { parla::formats::open_regular_file(fifo, st); });
}

TEST_CASE("a FIFO as a SentencePiece model is refused unopened, naming it (read through one descriptor)") {
  parla::testing::TempDir dir("fifo-spm");
  const std::string fifo = dir.file("source.spm");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  refused_without_waiting(fifo, [&] { parla::text::SentencePieceVocab::load(fifo); });
  CHECK_THROWS_WITH(parla::text::SentencePieceVocab::load(dir.file("missing.spm")),
                    Catch::Contains(dir.file("missing.spm") + ": file does not exist"));
}

TEST_CASE("read_bounded_file reads a file whole and refuses one over its bound by its size, naming it") {
  parla::testing::TempDir dir("read-regular");
  const std::string path = dir.write("f.bin", std::string(5000, 'x') + std::string(1, '\0') + "end");
  CHECK(parla::read_bounded_file(path, 5004) == std::string(5000, 'x') + std::string(1, '\0') + "end");
  CHECK_THROWS_WITH(parla::read_bounded_file(path, 5003), Catch::Contains(path + ": 5004 bytes, more than the 5003"));
  CHECK(parla::read_bounded_file(dir.write("empty", ""), 0).empty());
  CHECK_THROWS_WITH(parla::read_bounded_file(dir.path().string(), 10), Catch::Contains("is a folder, not a file"));
}

TEST_CASE("a character device and a folder are refused by name, a regular file opens") {
  parla::testing::TempDir dir("not-regular");
  CHECK_THROWS_WITH(parla::formats::MappedFile::open("/dev/null"), Catch::Contains("/dev/null: not a regular file"));
  CHECK_THROWS_WITH(parla::formats::read_bounded_file("/dev/zero", 1 << 20),
                    Catch::Contains("/dev/zero: not a regular file"));
  CHECK_THROWS_WITH(parla::formats::read_bounded_file(dir.path().string(), 1 << 20),
                    Catch::Contains("is a folder"));
  CHECK_THROWS_WITH(parla::formats::read_bounded_file(dir.file("absent"), 1 << 20),
                    Catch::Contains("does not exist"));
  const std::string text = "a small file\n";
  CHECK(parla::formats::read_bounded_file(dir.write("small.txt", text), 1 << 20) == text);
  CHECK_THROWS_WITH(parla::formats::read_bounded_file(dir.file("small.txt"), 4), Catch::Contains("more than the 4"));
  const auto mapped = parla::formats::MappedFile::open(dir.file("small.txt"));
  CHECK(std::string(reinterpret_cast<const char*>(mapped->data()), mapped->size()) == text);
}

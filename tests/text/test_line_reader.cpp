#include <catch2/catch.hpp>

#include <zlib.h>

#include <fstream>

#include "core/error.h"
#include "support/temp_dir.h"
#include "text/line_reader.h"

using Catch::Matchers::Contains;
using parla::text::LineReader;

namespace {
std::vector<std::string> read_all(const std::string& path) {
  LineReader r(path);
  std::vector<std::string> lines;
  std::string line;
  while (r.next(line)) lines.push_back(line);
  CHECK(r.line_number() == lines.size());
  return lines;
}
std::string write_gz(const std::string& path, const std::string& content) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, content.data(), static_cast<unsigned>(content.size()));
  gzclose(f);
  return path;
}
}  // namespace

TEST_CASE("lines are read without their newline, a last line without newline counts") {
  parla::testing::TempDir dir("line_reader");
  using V = std::vector<std::string>;
  CHECK(read_all(dir.write("a", "one\ntwo\n")) == V{"one", "two"});
  CHECK(read_all(dir.write("b", "one\ntwo")) == V{"one", "two"});
  CHECK(read_all(dir.write("c", "one\n\nthree\n")) == V{"one", "", "three"});
  CHECK(read_all(dir.write("d", "")) == V{});
  CHECK(read_all(dir.write("e", std::string("nul\0byte\n", 9))) == V{std::string("nul\0byte", 8)});
}

TEST_CASE("lines longer than the read buffer come back whole") {
  parla::testing::TempDir dir("line_reader");
  std::string big(3 << 20, 'x');
  CHECK(read_all(dir.write("big", "a\n" + big + "\nb")) == std::vector<std::string>{"a", big, "b"});
}

TEST_CASE("gzip input reads the same lines as plain input") {
  parla::testing::TempDir dir("line_reader");
  std::string content = "Wiederaufnahme der Sitzungsperiode\nIch erkl\xC3\xA4re\n\nEnde\n";
  CHECK(read_all(write_gz(dir.file("c.gz"), content)) == read_all(dir.write("c", content)));
}

TEST_CASE("a truncated gzip file is a data error, not silent data loss") {
  parla::testing::TempDir dir("line_reader");
  std::string content;
  for (int i = 0; i < 20000; ++i) content += "line " + std::to_string(i * 7919 % 10007) + "\n";
  auto path = write_gz(dir.file("t.gz"), content);
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  auto cut = dir.write("cut.gz", bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_AS(read_all(cut), parla::DataError);
}

TEST_CASE("a missing file is a data error naming it") {
  CHECK_THROWS_WITH(LineReader("/nonexistent/corpus.de"), Contains("/nonexistent/corpus.de"));
  CHECK_THROWS_AS(LineReader("/nonexistent/corpus.de"), parla::DataError);
}

TEST_CASE("corpus files are found by prefix and language, plain before gzip") {
  parla::testing::TempDir dir("line_reader");
  std::string prefix = dir.file("europarl-v7.de-en");
  write_gz(prefix + ".de.gz", "x\n");
  CHECK(parla::text::corpus_file(prefix, "de") == prefix + ".de.gz");
  dir.write("europarl-v7.de-en.de", "x\n");
  CHECK(parla::text::corpus_file(prefix, "de") == prefix + ".de");
  CHECK_THROWS_WITH(parla::text::corpus_file(prefix, "en"), Contains(prefix + ".en.gz"));
}

TEST_CASE("file checksums are zlib's CRC-32 of the stored bytes") {
  parla::testing::TempDir dir("line_reader");
  auto c = parla::text::checksum_file(dir.write("x", "123456789"));
  CHECK(c.bytes == 9);
  CHECK(c.crc32 == 0xCBF43926u);  // the CRC-32 check value of "123456789"
}

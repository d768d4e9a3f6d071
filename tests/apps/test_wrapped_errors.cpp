// A message that wraps a LibTorch exception carries its first line only: LibTorch's own text goes on with
// "Exception raised from ... (most recent call first): frame #0 ...", which a user cannot act on. The whole text
// is in the log at --log-level debug.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "core/config.h"
#include "core/error.h"
#include "models/checkpoint.h"
#include "models/factory.h"
#include "models/tiny_config.h"
#include "support/run.h"
#include "support/temp_dir.h"

using Catch::Matchers::Contains;
using parla::testing::run;

namespace {

size_t count_lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

// A tiny checkpoint cut in half, as a copy interrupted by a full disk leaves it.
std::string truncated_checkpoint(parla::testing::TempDir& dir) {
  auto cfg = parla::testing::tiny_transformer();
  auto model = parla::models::build_seq2seq(cfg, 20, 20);
  parla::Config c;
  c.model = cfg;
  parla::models::ModelMeta meta;
  meta.config = parla::config::to_json(c);
  auto good = dir.file("good.pt");
  parla::models::save_checkpoint(good, *model, meta);
  std::ifstream in(good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  return dir.write("truncated.pt", bytes.substr(0, bytes.size() / 2));
}

}  // namespace

TEST_CASE("first_line keeps a message and drops LibTorch's backtrace") {
  CHECK(parla::first_line("PytorchStreamReader failed reading zip archive: failed finding central directory\n"
                          "Exception raised from valid at inline_container.cc:177 (most recent call first):\n"
                          "frame #0: c10::Error::Error(...)") ==
        "PytorchStreamReader failed reading zip archive: failed finding central directory");
  // Some builds put the backtrace on the same line.
  CHECK(parla::first_line("failed finding central directory Exception raised from valid at x.cc:1") ==
        "failed finding central directory");
  CHECK(parla::first_line("one line") == "one line");
  CHECK(parla::first_line("") == "unknown error");
  CHECK(parla::first_line(std::string(1000, 'x')).size() == 300);
}

TEST_CASE("a truncated or foreign checkpoint gives one line naming the file, and no LibTorch internals even at "
          "debug level") {
  parla::testing::TempDir dir("wrapped-errors");
  auto truncated = truncated_checkpoint(dir);
  auto foreign = dir.write("foreign.pt", "not a checkpoint at all");
  auto input = dir.write("in.txt", "hello\n");
  for (const auto& path : {truncated, foreign}) {
    INFO(path);
    const std::vector<std::string> translate{"-m", path, "-i", input};
    const std::vector<std::string> average{"average", "-o", dir.file("avg.pt"), path, path};
    for (const auto& [app, args] :
         {std::make_pair("parla-translate", translate), std::make_pair("parla-train", average)}) {
      INFO(app);
      auto r = run(app, args);
      CHECK(r.exit_code == 1);
      CHECK_THAT(r.err, Contains(path));
      CHECK(count_lines(r.err) == 1);
      CHECK(r.err.find("Exception raised from") == std::string::npos);
      CHECK(r.err.find("frame #") == std::string::npos);
      std::vector<std::string> debug_args{"--log-level", "debug"};
      debug_args.insert(debug_args.end(), args.begin(), args.end());
      // Checkpoints are read by parla's own readers (models/tensor_archive.h), which say what is wrong themselves.
      auto debug = run(app, debug_args);
      CHECK(debug.exit_code == 1);
      CHECK_THAT(debug.err, Contains(path) && Contains("not a readable checkpoint"));
      CHECK(debug.err.find("Exception raised from") == std::string::npos);
    }
  }
}

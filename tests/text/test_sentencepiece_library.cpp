#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "support/run.h"

// parla_sentencepiece.so is loaded with RTLD_DEEPBIND, so libsentencepiece binds to whatever the module exports
// before its own libraries. On the GPU machine (a toolchain that puts libstdc++ code into the module) an export
// list wider than the C interface captured libsentencepiece's iostream calls and crashed every tokenizer.
TEST_CASE("the SentencePiece module exports its C interface (pspm_*) and nothing else") {
  const std::string module = std::string(PARLA_BIN_DIR) + "/../lib/parla_sentencepiece.so";
  auto r = parla::testing::run("/usr/bin/env", {"nm", "-D", "--defined-only", module});
  REQUIRE(r.exit_code == 0);
  std::istringstream lines(r.out);
  std::vector<std::string> names, foreign;
  for (std::string line; std::getline(lines, line);) {
    const std::string name = line.substr(line.rfind(' ') + 1);
    if (name.empty()) continue;
    names.push_back(name);
    if (name.rfind("pspm_", 0) != 0) foreign.push_back(name);
  }
  INFO("exported besides pspm_*: " << foreign.size() << (foreign.empty() ? "" : ", first " + foreign.front()));
  CHECK(foreign.empty());
  CHECK(names.size() >= 12);  // load, free_model, free, encode, decode, size, piece_to_id, id_to_piece, score, ...
}

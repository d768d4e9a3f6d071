#pragma once
// A small M2M-100 or NLLB-200 model built by transformers itself (tests/convert/hf_m2m100_fixture.py: random
// weights, the tokenizer files transformers writes, and reference.json with what transformers computes), imported
// with parla-convert hf. Needs Python's transformers: without it, make_m2m_fixture prints the skip marker and
// returns nothing.
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "models/checkpoint.h"
#include "support/python.h"
#include "support/run.h"
#include "support/temp_dir.h"

namespace parla::testing {

struct M2mFixture {
  std::string dir, checkpoint;
  nlohmann::json reference;
  std::map<int64_t, int64_t> to_parla;  // the folder's ids -> the checkpoint's
};

inline std::optional<M2mFixture> make_m2m_fixture(const TempDir& tmp, const std::string& kind, int texts) {
  const std::string python = parla::testing::python_with("transformers");
  if (python.empty()) return std::nullopt;
  M2mFixture f{tmp.file(kind), tmp.file(kind + ".pt"), {}, {}};
  auto r = parla::testing::run(python, {std::string(PARLA_SOURCE_DIR) + "/tests/convert/hf_m2m100_fixture.py", f.dir,
                                        "--kind", kind, "--texts", std::to_string(texts)});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(f.dir + "/reference.json");
  f.reference = nlohmann::json::parse(in);
  auto c = parla::testing::run("parla-convert", {"hf", f.dir, "-o", f.checkpoint});
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  const auto meta = parla::models::read_meta(f.checkpoint);
  std::map<std::string, int64_t> parla;
  for (size_t i = 0; i < meta.tgt_pieces.size(); ++i) parla[meta.tgt_pieces[i]] = static_cast<int64_t>(i);
  const auto& tokens = f.reference["tokenizer"]["id_to_token"];
  for (size_t id = 0; id < tokens.size(); ++id) f.to_parla[static_cast<int64_t>(id)] = parla.at(tokens[id].get<std::string>());
  return f;
}

inline std::vector<int64_t> parla_ids(const M2mFixture& f, const nlohmann::json& ids) {
  std::vector<int64_t> out;
  for (const auto& i : ids) out.push_back(f.to_parla.at(i.get<int64_t>()));
  return out;
}

}  // namespace parla::testing

#pragma once
// Access to ../shared/bleu (sacreBLEU 2.6.0's own outputs) for the metrics tests.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace parla::testing {

inline std::string bleu_fixture_dir() { return std::string(PARLA_SHARED_DIR) + "/bleu"; }

inline bool have_bleu_fixtures() { return std::filesystem::exists(bleu_fixture_dir() + "/expected.jsonl"); }

inline std::vector<nlohmann::json> read_jsonl(const std::string& name) {
  std::vector<nlohmann::json> out;
  std::ifstream in(bleu_fixture_dir() + "/" + name);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace parla::testing

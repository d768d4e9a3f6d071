#pragma once
// The training records of a run's metrics.jsonl (train/metrics_log.h), for tests that compare runs.
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace parla::test {

inline std::vector<nlohmann::json> train_records(const std::string& save_dir) {
  std::ifstream in(save_dir + "/metrics.jsonl");
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["type"] == "train") out.push_back(j);
  }
  return out;
}

// The loss of every logged update, in order.
inline std::vector<double> train_losses(const std::string& save_dir) {
  std::vector<double> out;
  for (const auto& r : train_records(save_dir)) out.push_back(r["loss"].get<double>());
  return out;
}

}  // namespace parla::test

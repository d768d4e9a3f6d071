#pragma once
// The machine-readable training log: one JSON object per line (JSON Lines), appended and flushed as events
// happen, so curves can be drawn while training runs and a resumed run continues the same file. Each record has
// "type" ("train" or "valid"), "step", "epoch" and the event's figures.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/output_file.h"

namespace parla::train {

class MetricsLog {
 public:
  MetricsLog() = default;  // disabled (non-master ranks)
  // Opens `path` for appending; truncate = start a fresh file (a new run). Throws IoError.
  MetricsLog(const std::string& path, bool truncate);
  // Appends and flushes one record. IoError naming the file and the system's reason when it cannot.
  void write(const nlohmann::json& record);
  bool enabled() const { return out_ != nullptr; }

 private:
  std::unique_ptr<OutputFile> out_;
};

}  // namespace parla::train

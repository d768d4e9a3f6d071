#include "train/metrics_log.h"

namespace parla::train {

MetricsLog::MetricsLog(const std::string& path, bool truncate)
    : out_(std::make_unique<OutputFile>(path, truncate ? OutputFile::Mode::truncate
                                                             : OutputFile::Mode::append)) {}

void MetricsLog::write(const nlohmann::json& record) {
  if (!out_) return;
  out_->write_line(record.dump());
  out_->flush();
}

}  // namespace parla::train

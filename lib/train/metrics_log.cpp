#include "train/metrics_log.h"

#include "core/error.h"

namespace parla::train {

MetricsLog::MetricsLog(const std::string& path, bool truncate)
    : path_(path), out_(path, truncate ? std::ios::trunc : std::ios::app) {
  if (!out_) throw IoError("cannot write metrics log '" + path + "'");
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!out_.is_open()) return;
  out_ << record.dump() << '\n';
  out_.flush();
  if (!out_) throw IoError("writing metrics log '" + path_ + "' failed (disk full?)");
}

}  // namespace parla::train

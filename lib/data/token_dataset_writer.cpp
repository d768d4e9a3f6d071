#include "data/token_dataset_writer.h"

#include <cstring>

#include "core/error.h"
#include "data/token_dataset.h"

namespace parla::data {

int token_bytes_for(int vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

TokenDatasetWriter::TokenDatasetWriter(const std::string& prefix, int token_bytes)
    : bin_(prefix + ".bin"), idx_(prefix + ".idx"), token_bytes_(token_bytes) {
  if (token_bytes != 2 && token_bytes != 4) throw DataError("token width must be 2 or 4 bytes");
  unsigned char header[kIndexHeaderBytes] = {};
  idx_.write(header, sizeof header);  // filled in by finish()
  uint64_t zero = 0;
  idx_.write(&zero, 8);
}

void TokenDatasetWriter::add(const std::vector<int>& ids) {
  scratch_.resize(ids.size() * token_bytes_);
  uint64_t limit = token_bytes_ == 2 ? 0xFFFFu : 0xFFFFFFFFu;
  for (size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] < 0 || static_cast<uint64_t>(ids[k]) > limit)
      throw DataError("token id " + std::to_string(ids[k]) + " does not fit in " + std::to_string(token_bytes_) +
                      " bytes (" + bin_.path() + ")");
    if (token_bytes_ == 2) {
      uint16_t v = static_cast<uint16_t>(ids[k]);
      std::memcpy(&scratch_[2 * k], &v, 2);
    } else {
      uint32_t v = static_cast<uint32_t>(ids[k]);
      std::memcpy(&scratch_[4 * k], &v, 4);
    }
  }
  bin_.write(scratch_.data(), scratch_.size());
  tokens_ += ids.size();
  ++sentences_;
  idx_.write(&tokens_, 8);
}

void TokenDatasetWriter::finish() {
  unsigned char header[kIndexHeaderBytes];
  uint32_t version = kIndexVersion, width = static_cast<uint32_t>(token_bytes_);
  std::memcpy(header, kIndexMagic, 8);
  std::memcpy(header + 8, &version, 4);
  std::memcpy(header + 12, &width, 4);
  std::memcpy(header + 16, &sentences_, 8);
  std::memcpy(header + 24, &tokens_, 8);
  idx_.write_at(0, header, sizeof header);
  bin_.close();
  idx_.close();
}

}  // namespace parla::data

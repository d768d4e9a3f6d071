#pragma once
// The training batches of a run as raw token ids (training.dump_batches), so that the PyTorch reference peer
// (bench/reference/) trains on exactly the batches parla-train trained on. Little-endian binary:
//   8 bytes magic "PRLBAT01", then per batch: int64 B, int64 S, int64 T, src int64[B*S], tgt_in int64[B*T],
//   tgt_out int64[B*T]   (row-major; T = 0 for a batch without target, as BERT's)
// Written to PATH.tmp.<pid> (AtomicOutputFile) and renamed to PATH when the run ends (or stops on a signal),
// so PATH is always whole; a run that fails removes the temporary.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/batch.h"
#include "core/output_file.h"

namespace parla::train {

class BatchDumpWriter {
 public:
  // Creates PATH's temporary. Throws IoError naming training.dump_batches, the file and the system's reason when it
  // cannot be written.
  explicit BatchDumpWriter(const std::string& path);
  void write(const data::Batch& batch);  // a CPU batch
  // Flushes and renames the temporary to PATH. Throws IoError.
  void finish();

 private:
  std::optional<AtomicOutputFile> out_;  // optional: built inside the constructor's error naming
};

struct DumpedBatch {
  int64_t batch = 0, src_len = 0, tgt_len = 0;  // B, S, T
  std::vector<int64_t> src, tgt_in, tgt_out;
};

// Reads a whole dump. Throws DataError naming the file when it is truncated or not a batch dump.
std::vector<DumpedBatch> read_batch_dump(const std::string& path);

}  // namespace parla::train

#include "train/batch_dump.h"

#include <cstring>
#include <fstream>

#include <torch/torch.h>

#include "core/error.h"

namespace parla::train {

namespace {

constexpr char kMagic[8] = {'P', 'R', 'L', 'B', 'A', 'T', '0', '1'};

// The format is little-endian; raw int64 writes are only that on a little-endian host (every machine parla
// runs on), so refuse the rest rather than write a file the peer misreads.
void require_little_endian() {
  const uint16_t one = 1;
  uint8_t first = 0;
  std::memcpy(&first, &one, 1);
  if (first != 1) throw IoError("training.dump_batches: the batch dump format needs a little-endian machine");
}

void write_ids(OutputFile& out, const torch::Tensor& t) {
  if (!t.defined() || t.numel() == 0) return;
  auto c = t.to(torch::kCPU, torch::kLong).contiguous();
  out.write(c.data_ptr<int64_t>(), static_cast<size_t>(c.numel()) * 8);
}

// The file's own IoError (its name and the system's reason), prefixed with the key that asked for it.
template <class F>
void named(F&& f) {
  try {
    f();
  } catch (const IoError& e) {
    throw IoError(std::string("training.dump_batches: ") + e.what());
  }
}

}  // namespace

BatchDumpWriter::BatchDumpWriter(const std::string& path) {
  require_little_endian();
  named([&] {
    out_.emplace(path);
    out_->file().write(kMagic, sizeof kMagic);
  });
}

void BatchDumpWriter::write(const data::Batch& batch) {
  const int64_t b = batch.src.size(0), s = batch.src.size(1);
  const int64_t t = batch.tgt_out.defined() ? batch.tgt_out.size(1) : 0;
  named([&] {
    auto& out = out_->file();
    for (int64_t v : {b, s, t}) out.write(&v, 8);
    write_ids(out, batch.src);
    if (t > 0) {
      write_ids(out, batch.tgt_in);
      write_ids(out, batch.tgt_out);
    }
  });
}

void BatchDumpWriter::finish() {
  named([&] { out_->commit(); });
}

std::vector<DumpedBatch> read_batch_dump(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("cannot read batch dump '" + path + "'");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, kMagic, 8) != 0)
    throw DataError("'" + path + "' is not a parla batch dump (no PRLBAT01 magic)");
  std::vector<DumpedBatch> out;
  auto read_ids = [&](std::vector<int64_t>& v, int64_t n) {
    v.resize(static_cast<size_t>(n));
    if (n > 0 && !in.read(reinterpret_cast<char*>(v.data()), n * 8))
      throw DataError("'" + path + "' is truncated in batch " + std::to_string(out.size()));
  };
  int64_t dims[3];
  while (in.read(reinterpret_cast<char*>(dims), sizeof dims)) {
    DumpedBatch d;
    d.batch = dims[0];
    d.src_len = dims[1];
    d.tgt_len = dims[2];
    if (d.batch < 0 || d.src_len < 0 || d.tgt_len < 0)
      throw DataError("'" + path + "' has negative sizes in batch " + std::to_string(out.size()));
    read_ids(d.src, d.batch * d.src_len);
    read_ids(d.tgt_in, d.batch * d.tgt_len);
    read_ids(d.tgt_out, d.batch * d.tgt_len);
    out.push_back(std::move(d));
  }
  if (in.gcount() != 0) throw DataError("'" + path + "' is truncated after batch " + std::to_string(out.size()));
  return out;
}

}  // namespace parla::train

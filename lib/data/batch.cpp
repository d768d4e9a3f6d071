#include "data/batch.h"

#include <algorithm>

#include "core/error.h"
#include "text/special_ids.h"

namespace parla::data {

namespace {

void check_id(const TokenDataset& d, int64_t id) {
  if (id < 0 || static_cast<size_t>(id) >= d.size())
    throw DataError("sentence " + std::to_string(id) + " is out of range of dataset '" + d.path_prefix() + "' (" +
                    std::to_string(d.size()) + " sentences)");
}

}  // namespace

Batch Batch::to(const torch::Device& device) const {
  if (device.is_cpu()) return *this;
  Batch b = *this;
  for (torch::Tensor* t : {&b.src, &b.tgt_in, &b.tgt_out, &b.segments, &b.mlm_labels, &b.nsp_labels})
    if (t->defined()) *t = t->to(device, /*non_blocking=*/true);
  return b;
}

namespace {

// `width` rounded up to a multiple of `multiple` (> 1), else itself.
size_t padded_width(size_t width, int64_t multiple) {
  if (multiple <= 1) return width;
  const auto m = static_cast<size_t>(multiple);
  return (width + m - 1) / m * m;
}

}  // namespace

torch::Tensor collate_source(const TokenDataset& src, const std::vector<int64_t>& ids, int64_t pad_to_multiple) {
  size_t max_len = 0;
  for (int64_t id : ids) {
    check_id(src, id);
    max_len = std::max(max_len, src.length(static_cast<size_t>(id)) + 1);
  }
  max_len = padded_width(max_len, pad_to_multiple);
  auto out = torch::full({static_cast<int64_t>(ids.size()), static_cast<int64_t>(max_len)}, parla::kPadId,
                         torch::kLong);
  int64_t* p = out.data_ptr<int64_t>();
  for (size_t r = 0; r < ids.size(); ++r) {
    size_t n = src.length(static_cast<size_t>(ids[r]));
    int64_t* row = p + r * max_len;
    src.copy_to(static_cast<size_t>(ids[r]), row);
    row[n] = parla::kEosId;
  }
  return out;
}

Batch collate_parallel(const ParallelSplit& split, const std::vector<int64_t>& ids, int64_t start_id,
                       int64_t pad_to_multiple) {
  Batch b;
  b.src = collate_source(split.src, ids, pad_to_multiple);
  size_t max_t = 0;
  for (int64_t id : ids) {
    check_id(split.tgt, id);
    max_t = std::max(max_t, split.tgt.length(static_cast<size_t>(id)) + 1);
  }
  max_t = padded_width(max_t, pad_to_multiple);
  const int64_t n = static_cast<int64_t>(ids.size()), t = static_cast<int64_t>(max_t);
  b.tgt_in = torch::full({n, t}, parla::kPadId, torch::kLong);
  b.tgt_out = torch::full({n, t}, parla::kPadId, torch::kLong);
  int64_t* in = b.tgt_in.data_ptr<int64_t>();
  int64_t* out = b.tgt_out.data_ptr<int64_t>();
  for (int64_t r = 0; r < n; ++r) {
    size_t len = split.tgt.length(static_cast<size_t>(ids[r]));
    int64_t* row_in = in + r * t;
    int64_t* row_out = out + r * t;
    split.tgt.copy_to(static_cast<size_t>(ids[r]), row_out);
    row_in[0] = start_id;
    std::copy(row_out, row_out + len, row_in + 1);
    row_out[len] = parla::kEosId;
    b.src_tokens += static_cast<int64_t>(split.src.length(static_cast<size_t>(ids[r]))) + 1;
    b.tgt_tokens += static_cast<int64_t>(len) + 1;
  }
  b.sentences = n;
  return b;
}

}  // namespace parla::data

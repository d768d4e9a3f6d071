#pragma once
// Attention of one query position per row, the shape of every incremental decoding step: softmax(q k^T /
// sqrt(Dh)) v for q [N, H, Dh] over L cached keys/values. As batched matmuls this is N*H matrix-vector
// products, which LibTorch 1.13 runs as one BLAS call each (plus a select per call): at 320 beam rows it
// cost more than the model's real GEMMs. Here one pass per (row, head) reads each key and value once.
//
// The decoder self-attention cache uses beam indirection (as in FasterTransformer's decoder): a step's keys
// and values are stored once, as computed, and every row keeps the row index of its ancestor at each past
// step. A beam reorder then gathers that small index table instead of copying [N, H, T, Dh] every step, and
// beams sharing a prefix read the same cached memory.
#include <utility>
#include <vector>

#include <torch/types.h>

namespace parla::nn {

class KeyValueCache {
 public:
  // Appends the newest position: k, v [N, H, Dh] for the current N rows, copied in place into buffers
  // preallocated on k's device (capacity doubles when full), so a step allocates nothing.
  void append(const torch::Tensor& k, const torch::Tensor& v);
  // Row n becomes old row rows[n] (int64 [N']); nothing is copied but the ancestor table.
  void reorder(const torch::Tensor& rows);
  // Frees positions before `position` (local attention needs only the last window): attention starts there.
  // Their slots are reused when the buffer next fills (it is compacted instead of grown).
  void drop_before(int64_t position);
  // Continuous batching: `count` new rows join after the current ones. Their history begins at the current
  // length, so attention reads none of the positions before it (row_first()).
  void add_rows(int64_t count);
  // Forgets positions before `position` for good (no row of the batch may still read them) and renumbers the
  // rest from 0, so that a batch that never empties does not grow its tables without bound.
  void rebase(int64_t position);
  // A search that knows its length limit: no row appends more than `more` positions from now. On the CPU the
  // doubling buffer then stops at the limit instead of the next power of two (33 steps: 34 slots, not 64). A
  // hint: appending past it grows the buffer as before.
  void expect(int64_t more);

  int64_t length() const { return static_cast<int64_t>(keys_.size()); }  // positions appended so far
  int64_t first() const { return first_; }                               // first position still kept
  bool empty() const { return keys_.empty(); }
  // Keys and values [N, H, length - first, Dh] gathered per row: the plain layout, for the slow paths.
  std::pair<torch::Tensor, torch::Tensor> gather() const;

  // Position t's keys/values [N_t, H, Dh]: views into the buffers (rows N_t.. of the slot are not its).
  const std::vector<torch::Tensor>& keys() const { return keys_; }
  const std::vector<torch::Tensor>& values() const { return values_; }
  // int64 [N, length]: a view into a wider table, so rows are strided (stride(0) >= length, stride(1) == 1).
  const torch::Tensor& ancestors() const { return ancestors_; }
  // The storage: position t lives in slot t - base() of [slots, rows, H, Dh] buffers, for device code that
  // gathers all positions in one op.
  const torch::Tensor& key_buffer() const { return key_buffer_; }
  const torch::Tensor& value_buffer() const { return value_buffer_; }
  int64_t base() const { return base_; }
  // int64 [N] on the ancestors' device: the first position each row may read, or undefined when every row
  // reads them all (no row joined late).
  const torch::Tensor& row_first() const { return row_first_; }

 private:
  torch::Tensor key_buffer_, value_buffer_;   // [slots, rows, H, Dh]
  std::vector<torch::Tensor> keys_, values_;  // per position t: a view [N_t, H, Dh], undefined once dropped
  torch::Tensor ancestor_table_;              // int64 [N, capacity >= length]
  torch::Tensor ancestors_;                   // its first `length` columns
  torch::Tensor iota_;                        // 0, 1, ..., rows - 1: a new position's own ancestors
  torch::Tensor row_first_;                   // see row_first()
  int64_t first_ = 0, base_ = 0;
  int64_t expected_ = 0;  // the length limit (expect()): the buffer grows no further than this; 0 when nobody said
};

// q [N, H, Dh] over the cached positions first..length-1 -> [N, H, Dh]; `weights` receives [N, H, length -
// first] when non-null. Any device and floating type (CPU float/double take the direct kernel).
torch::Tensor attend_cache(const torch::Tensor& q, const KeyValueCache& cache, torch::Tensor* weights = nullptr);

// The same for float on the CPU over raw buffers, for a fused decoder step (models/fused_decoder_step.h): row n's
// query heads at q + n * q_row (contiguous [H, Dh]), out [N, H, Dh] contiguous; the same bits as the tensor form.
void attend_cache(const float* q, int64_t q_row, const KeyValueCache& cache, float* out);

// q [B, H, Dh] over memory keys/values [M, H, S, Dh] where B = M * G and rows m*G .. m*G+G-1 attend to memory
// row m (the beams of one sentence); key_valid bool [M, S] or undefined. -> [B, H, Dh]; weights [B, H, S].
// A row with no valid key gets zero output and zero weights.
torch::Tensor attend_memory(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const torch::Tensor& key_valid, torch::Tensor* weights = nullptr);
// The same for float on the CPU over raw buffers, B query rows as attend_cache's raw form; k, v with unit stride
// along Dh, key_valid contiguous bool or undefined. With `memory_rows` (int64 [G] on the CPU, B = G * beam)
// group g reads memory row memory_rows[g] of k, v and key_valid instead of row g: sentences that left a batch
// need not be copied out of the memory.
void attend_memory(const float* q, int64_t q_row, int64_t B, const torch::Tensor& k, const torch::Tensor& v,
                   const torch::Tensor& key_valid, float* out, const torch::Tensor& memory_rows = {});

}  // namespace parla::nn

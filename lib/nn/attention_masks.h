#pragma once
// Where the attention masks are built. Every mask is bool, true = the query may attend to the key, shaped to
// broadcast against scores [B, H, Tq, Tk].
#include <torch/types.h>

namespace parla::nn {

// Key padding: tokens [B, Tk] -> [B, 1, 1, Tk], true where tokens != pad_id.
torch::Tensor padding_mask(const torch::Tensor& tokens, int64_t pad_id);

// Causal (no peeking ahead, Vaswani et al. 2017 Sec. 3.2.3): [Tq, Tk], query i (absolute position offset + i)
// sees keys j <= offset + i. `offset` is the number of earlier positions already in the key cache.
torch::Tensor causal_mask(int64_t tq, int64_t tk, int64_t offset = 0);

// Restricted (local) self-attention (Vaswani et al. 2017 Sec. 4, neighbourhood of size r): [Tq, Tk], query at
// absolute position p = offset + i sees keys j with |p - j| <= window, and only j <= p when causal.
torch::Tensor local_mask(int64_t tq, int64_t tk, int64_t window, bool causal, int64_t offset = 0);

// Logical and of two masks, either of which may be undefined (= allow everything).
torch::Tensor combine_masks(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace parla::nn

#pragma once
// Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"): softmax(q k^T) is replaced by the
// kernel phi(q) phi(k)^T with phi(x) = elu(x) + 1, so that
//   out_i = phi(q_i)^T (sum_j phi(k_j) v_j^T) / (phi(q_i)^T sum_j phi(k_j))            (their Eq. 5-6)
// costs O(T d^2) instead of O(T^2 d). In the causal case the sums run over j <= i (Eq. 8-10): they are
// prefix sums in training and a constant-size recurrent state in incremental decoding.
// All tensors are [B, H, T, Dh]. LinearSelfAttention is the layer (model.attention "linear").
#include <cstdint>
#include <memory>

#include <torch/types.h>

#include "nn/self_attention.h"
#include "nn/self_attention_cache.h"

namespace parla::nn {

torch::Tensor elu_feature_map(const torch::Tensor& x);

// key_valid: bool [B, Tk] (true = real token) or undefined. Causal requires Tq == Tk.
torch::Tensor linear_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& key_valid, bool causal);

// The equivalent explicit weights [B, H, Tq, Tk] (quadratic; for alignments, heatmaps and tests).
torch::Tensor linear_attention_weights(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& key_valid,
                                       bool causal);

// The recurrent state of causal linear attention: s = sum phi(k) v^T [B, H, Dh, Dh], z = sum phi(k) [B, H, Dh].
struct LinearAttentionState {
  torch::Tensor s, z;
};

// One causal step: q, k, v [B, H, 1, Dh]; adds the new key/value to `state` and returns [B, H, 1, Dh].
torch::Tensor linear_attention_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    LinearAttentionState& state);

// The running sums as a decoder layer's cache keeps them (linear and performer self-attention): rows reorder with
// the beam, and rows that join start from zero sums, since 0 + x == x gives the sums they would have alone.
class LinearDecodingState : public VariantDecodingState {
 public:
  LinearAttentionState sums;
  void reorder(const torch::Tensor& indices) override;
  void add_rows(int64_t count) override;
  // The linear state `cache` holds (made by a variant's new_decoding_state).
  static LinearAttentionState& of(SelfAttentionCache& cache);
};

// Linear self-attention: no settings of its own. Decoding keeps the recurrent state (a LinearDecodingState), and
// the individual keys only when weights are asked for.
class LinearSelfAttentionImpl : public SelfAttentionImpl {
 public:
  explicit LinearSelfAttentionImpl(const MultiHeadAttentionOptions& options);

 protected:
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& key_valid, bool causal, torch::Tensor* weights) override;
  torch::Tensor attend_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            SelfAttentionCache& cache, torch::Tensor* weights) override;
  std::unique_ptr<VariantDecodingState> new_decoding_state() const override;
};
TORCH_MODULE(LinearSelfAttention);

}  // namespace parla::nn

#pragma once
// Nyström attention (Xiong et al. 2021, "Nyströmformer"; seed 002, eq. 19): softmax(Q K^T / sqrt(Dh)) is
// approximated through m landmark queries Q~ and keys K~ as
//   softmax(Q K~^T) (softmax(Q~ K~^T))^+ softmax(Q~ K^T) = F A^+ B
// (the deck's text garbles the first factor into softmax(Q~ K~^T)) with ^+ the Moore-Penrose pseudo-inverse, so
// that out = F (A^+ (B V)) costs O(T m Dh) instead of O(T^2 Dh).
// All scores are scaled by 1/sqrt(Dh) as in scaled dot-product attention. Encoder (non-causal) only: a landmark
// mixes every position of its segment, so a causal variant would peek ahead.
//
// Landmarks are segment means (the deck's "strided average pooling") over the REAL positions of each row only:
// with L real positions (counted in order, padding skipped), landmark s (0 <= s < m) averages real positions
// [floor(s L / m), floor((s+1) L / m)); when L < m that range can be empty, and then segment s is the single
// real position floor(s L / m) (landmarks repeat). In general segment s is
//   [floor(s L / m), max(floor((s+1) L / m), floor(s L / m) + 1)).
// Padding therefore never enters a landmark, and a padded batch equals batch 1. When L <= m every real position
// is a landmark and, with the exact pseudo-inverse, the approximation is exact: with E [m, L] the landmark
// selection (full column rank) and F = softmax(Q K^T E^T) (full row rank), A = E F and B = E softmax(Q K^T), so
// F (E F)^+ E softmax(Q K^T) = F F^+ E^+ E softmax(Q K^T) = softmax(Q K^T).
//
// Tensors are [B, H, T, Dh]; key_valid is bool [B, T] (true = real token) or undefined (all real). Queries and
// keys are the same positions (self-attention), so key_valid also tells which queries are real. Padded query rows
// get finite (meaningless) outputs, never NaN; a row without any real token gives zeros.
//
// NystromSelfAttention is the layer (model.encoder_attention "nystrom"), with Xiong et al.'s depthwise convolution
// skip over the values as a parameter.
#include <cstdint>

#include <torch/types.h>

#include "nn/self_attention.h"

namespace parla::nn {

// Segment-mean landmarks of x [B, H, T, Dh] over the real positions (rule above) -> [B, H, m, Dh].
torch::Tensor nystrom_landmarks(const torch::Tensor& x, const torch::Tensor& key_valid, int64_t landmarks);

// Iterative Moore-Penrose pseudo-inverse of a [..., r, c] (Xiong et al. eq. 7, from Razavi et al. 2014):
//   Z_0 = A^T / (||A||_1 ||A||_inf),  Z_{j+1} = 1/4 Z_j (13 I - A Z_j (15 I - A Z_j (7 I - A Z_j))).
// The residual E = I - A Z obeys E' = (3 E^3 + E^4) / 4 (third order), starting from 1 - sigma_min^2 / (||A||_1
// ||A||_inf): a few iterations suffice for well-conditioned matrices (softmax landmark kernels), many more for
// ill-conditioned ones (for a softmax matrix with sigma_min = 0.03, I - A Z is still 0.26 after 6). The norms are
// per matrix. Half and bfloat16 inputs are iterated in float32, and autocast is off for their device type meanwhile
// (it would run the matmuls in fp16/bf16); the result has the input's dtype.
torch::Tensor iterative_pinv(const torch::Tensor& a, int64_t iterations = 6);

// Nyström attention of q, k, v [B, H, T, Dh] -> [B, H, T, Dh], without the convolution skip. `exact_inverse` uses
// torch::linalg_pinv (SVD; default tolerance eps * m) instead of the iteration (tests, analysis).
torch::Tensor nystrom_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const torch::Tensor& key_valid, int64_t landmarks, int64_t pinv_iterations = 6,
                                bool exact_inverse = false);

// The equivalent weights [B, H, T, T] = softmax(Q K~^T) pinv(softmax(Q~ K~^T)) softmax(Q~ K^T) (quadratic; for
// heatmaps and tests). Columns of padded keys are exactly zero. Entries can be negative; rows sum to 1 as far as
// A^+ inverts A (A 1 = 1, so A^-1 1 = 1).
torch::Tensor nystrom_attention_weights(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& key_valid,
                                        int64_t landmarks, int64_t pinv_iterations = 6, bool exact_inverse = false);

// Xiong et al.'s depthwise convolution skip over the values (their code: a Conv2d with groups = H over
// [B, H, T, Dh], kernel (K, 1), no bias, zero padding K / 2): v [B, H, T, Dh], weight [H, 1, K, 1] with K odd ->
// [B, H, T, Dh], to be added to the attention output. Values at padded positions are zeroed first, so each real
// position sees zeros outside [0, L) exactly as in batch 1.
torch::Tensor depthwise_conv_skip(const torch::Tensor& v, const torch::Tensor& key_valid, const torch::Tensor& weight);

// Throws parla::ConfigError naming the key: "model.nystrom_landmarks" (< 1), "model.nystrom_pinv_iterations" (< 1),
// "model.nystrom_conv_kernel" (negative or even; 0 = no convolution skip, the paper uses 33).
void validate_nystrom(int64_t landmarks, int64_t pinv_iterations, int64_t conv_kernel);

struct NystromAttentionOptions {
  int64_t landmarks = 32;       // landmarks m (model.nystrom_landmarks)
  int64_t pinv_iterations = 6;  // pseudo-inverse iterations (model.nystrom_pinv_iterations)
  int64_t conv_kernel = 33;     // depthwise convolution skip over the values, 0 = none (model.nystrom_conv_kernel)
};

// Encoder only: a causal call or a decoding step throws.
class NystromSelfAttentionImpl : public SelfAttentionImpl {
 public:
  // Throws ConfigError for bad options (validate_nystrom).
  NystromSelfAttentionImpl(const MultiHeadAttentionOptions& options, const NystromAttentionOptions& nystrom);

  torch::Tensor nystrom_conv;  // [H, 1, kernel, 1] (a parameter), undefined for conv_kernel 0

 protected:
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& key_valid, bool causal, torch::Tensor* weights) override;
  torch::Tensor attend_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            SelfAttentionCache& cache, torch::Tensor* weights) override;

 private:
  NystromAttentionOptions nystrom_;
};
TORCH_MODULE(NystromSelfAttention);

}  // namespace parla::nn

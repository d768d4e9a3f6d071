#pragma once
// Performer attention, FAVOR+ (Choromanski et al. 2021, "Rethinking Attention with Performers"): linear attention
// (linear_attention.h, seed 002 eq. 15-16) whose feature map is a random-feature estimate of the softmax kernel
// itself, so that it approximates scaled dot-product attention instead of replacing it by another kernel. The
// random-feature map of seed 002 (the phi(x) = h(x)/sqrt(m) [f_1(w_1^T x), ..., f_l(w_m^T x)] line after eq. 16)
// with FAVOR+'s positive features h(x) = exp(-|x|^2/2), f = exp (their Lemma 1):
//   phi(x) = exp(w_i^T x - |x|^2/2) / sqrt(m),  w_i ~ N(0, I_d),  E[phi(x)^T phi(y)] = exp(x^T y).
// Positive features keep the normaliser positive (sin/cos features do not: their Sec. 2.3), and orthogonal
// w_i (their Sec. 2.4) lower the variance further. q and k are scaled by Dh^(-1/4) each, so the estimated kernel
// is exp(q^T k / sqrt(Dh)), the one of scaled dot-product attention. All tensors are [B, H, T, Dh].
//
// PerformerSelfAttention is the layer (model.attention "performer"): the features are a buffer drawn from the
// layer's seed and redrawn on a schedule in training; decoding keeps the recurrent state (linear attention's LinearDecodingState).
#include <cstdint>

#include <torch/types.h>

#include "nn/linear_attention.h"
#include "nn/self_attention.h"

namespace parla::nn {

// Random projection [m, d] (float32), a deterministic function of `seed`: drawn on the CPU with a LibTorch CPU
// generator seeded by `seed`, so the same seed gives the same matrix on any device after .to(). orthogonal = true:
// the paper's regular orthogonal random features: blocks of d orthonormal rows (QR of a Gaussian d x d matrix, with
// the signs of R's diagonal folded in so that the block is Haar-distributed), each row rescaled by the norm of an
// independent N(0, I_d) vector (so each row alone is again N(0, I_d)), stacked to m rows with the last block
// truncated. orthogonal = false: iid N(0, I_d) rows.
torch::Tensor orthogonal_random_features(int64_t m, int64_t d, uint64_t seed, bool orthogonal = true);

// phi(x) = exp(w x - |x|^2/2) / sqrt(m) of x [..., T, Dh] for a projection w [m, Dh] or per head [H, m, Dh]
// (with x [B, H, T, Dh]) -> [..., T, m]. Exactly the formula: no Dh^(-1/4) scaling and no stabilisation (the
// attention functions add both). w is cast to x's dtype and device.
torch::Tensor favor_features(const torch::Tensor& x, const torch::Tensor& w);

// FAVOR+ attention out_i = phi(q_i)^T (sum_j phi(k_j) v_j^T) / (phi(q_i)^T sum_j phi(k_j)) with q, k scaled by
// Dh^(-1/4). q [B, H, Tq, Dh], k [B, H, Tk, Dh], v [B, H, Tk, Dv]; w [m, Dh] or [H, m, Dh]; key_valid bool [B, Tk]
// (true = real token) or undefined. Causal needs Tq == Tk and runs in chunks of 64 positions: the prefix sums of
// phi(k) v^T at chunk boundaries plus a masked quadratic term inside each chunk, O(T (64 m + m Dv)) time and
// O(T/64 m Dv + 64 T) memory instead of linear attention's per-position prefix sums O(T m Dv).
//
// Numerical stability (the exponent can be large): phi(q_i) is multiplied by exp(-max_r log phi(q_i)_r), one
// constant per query row; phi(k) by exp(-c), one constant per (batch row, head): non-causal, c = the largest log
// feature over the REAL keys; causal, c = max_r |w_r|^2/2 - 60, from the bound w^T x - |x|^2/2 <= |w|^2/2 of every
// log feature: it does not depend on the keys, so that no future key influences a past output and incremental
// decoding equals the full pass, and it keeps every causal key feature <= e^60 (sums over up to 1e12 of them stay
// finite in float32) while keys whose log features lie up to ~147 below the bound remain representable. Both
// constants cancel between numerator and normaliser (and carry no gradient).
// Precision: half and bfloat16 inputs are computed in float32 with autocast off for their device type (the
// exponentials need float32's range, and log features of tens need more than bfloat16's mantissa); the result has
// the inputs' dtype. Float32 and float64 are computed as they are.
// Normaliser guard: a row whose normaliser is <= the smallest normal number of its dtype (no allowed key, or all
// features underflowed) is divided by 1 instead, i.e. gives (close to) zeros, never NaN, with finite gradients; all
// other rows are divided exactly (no epsilon), so padded query rows stay finite.
torch::Tensor performer_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& key_valid, const torch::Tensor& w, bool causal);

// The equivalent explicit weights [B, H, Tq, Tk] (quadratic; for alignments, heatmaps and tests): rows sum to 1
// over the allowed keys, padded keys get exactly 0. Causal allows key j for query i when j <= i + Tk - Tq.
torch::Tensor performer_attention_weights(const torch::Tensor& q, const torch::Tensor& k,
                                          const torch::Tensor& key_valid, const torch::Tensor& w, bool causal);

// One causal step: q, k, v [B, H, 1, Dh]; adds the new key/value to `state` (s = sum phi(k) v^T [B, H, m, Dv],
// z = sum phi(k) [B, H, m], both with the causal constant exp(-c) above, in float32 for half/bfloat16 inputs) and
// returns [B, H, 1, Dv], equal to the last row of the causal performer_attention over all positions so far. An
// undefined state is an empty one; rows appended with zero s and z (LinearDecodingState::add_rows) start with an
// empty history; index_select on dim 0 reorders beams. `w` must stay the same for the whole sequence.
torch::Tensor performer_attention_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& w, LinearAttentionState& state);

// Redraw schedule (the paper redraws the random features periodically during training): true when the features
// are to be redrawn before the next update, given `steps_done` updates taken so far (TrainingState::step): after every
// `redraw_every` updates, i.e. at steps_done = redraw_every, 2 redraw_every, ...; never for redraw_every = 0 and
// never before the first update (that one uses the initial draw).
bool performer_redraw_due(int64_t steps_done, int64_t redraw_every);

// Throws parla::ConfigError naming key 'model.performer_features' for features < 1 and
// 'model.performer_redraw_every' for redraw_every < 0.
void validate_performer(int64_t features, int64_t redraw_every);

struct PerformerAttentionOptions {
  int64_t features = 64;        // random features m (model.performer_features)
  int64_t redraw_every = 1000;  // training forward passes between redraws, 0 = never (model.performer_redraw_every)
};

class PerformerSelfAttentionImpl : public SelfAttentionImpl {
 public:
  // Throws ConfigError for bad options (validate_performer); the first draw is a function of options.seed.
  PerformerSelfAttentionImpl(const MultiHeadAttentionOptions& options, const PerformerAttentionOptions& performer);

  // Buffers, saved in checkpoints: the features [m, Dh] and the training forward passes seen (int64 scalar: the
  // redraw schedule resumes with the checkpoint).
  torch::Tensor performer_features, performer_passes;

 protected:
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& key_valid, bool causal, torch::Tensor* weights) override;
  torch::Tensor attend_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            SelfAttentionCache& cache, torch::Tensor* weights) override;
  std::unique_ptr<VariantDecodingState> new_decoding_state() const override;

 private:
  // In training, redraw the features every redraw_every forward passes.
  void maybe_redraw_features();

  PerformerAttentionOptions performer_;
};
TORCH_MODULE(PerformerSelfAttention);

}  // namespace parla::nn

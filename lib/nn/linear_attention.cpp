#include "nn/linear_attention.h"

#include <torch/torch.h>

#include "nn/self_attention_cache.h"

namespace parla::nn {

namespace {
// Guards the normaliser; phi > 0 makes it positive except for rows whose keys are all padding.
constexpr double kEps = 1e-6;

torch::Tensor masked_features(const torch::Tensor& k, const torch::Tensor& key_valid) {
  auto fk = elu_feature_map(k);
  if (key_valid.defined()) fk = fk * key_valid.unsqueeze(1).unsqueeze(-1).to(fk.scalar_type());
  return fk;
}
}  // namespace

torch::Tensor elu_feature_map(const torch::Tensor& x) { return torch::elu(x) + 1.0; }

torch::Tensor linear_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& key_valid, bool causal) {
  auto fq = elu_feature_map(q);
  auto fk = masked_features(k, key_valid);
  if (!causal) {
    auto kv = torch::matmul(fk.transpose(-2, -1), v);         // [B,H,Dh,Dv]
    auto z = fk.sum(-2, /*keepdim=*/true);                     // [B,H,1,Dh]
    auto num = torch::matmul(fq, kv);                          // [B,H,Tq,Dv]
    auto den = (fq * z).sum(-1, /*keepdim=*/true) + kEps;      // [B,H,Tq,1]
    return num / den;
  }
  TORCH_CHECK(q.size(-2) == k.size(-2), "causal linear attention needs as many queries as keys");
  // Prefix sums of the outer products phi(k_j) v_j^T: memory O(T Dh Dv), linear in T.
  auto s = torch::cumsum(fk.unsqueeze(-1) * v.unsqueeze(-2), 2);       // [B,H,T,Dh,Dv]
  auto z = torch::cumsum(fk, 2);                                       // [B,H,T,Dh]
  auto num = torch::matmul(fq.unsqueeze(-2), s).squeeze(-2);           // [B,H,T,Dv]
  auto den = (fq * z).sum(-1, /*keepdim=*/true) + kEps;
  return num / den;
}

torch::Tensor linear_attention_weights(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& key_valid,
                                       bool causal) {
  auto a = torch::matmul(elu_feature_map(q), masked_features(k, key_valid).transpose(-2, -1));
  if (causal) {
    auto tq = q.size(-2), tk = k.size(-2);
    a = a * torch::ones({tq, tk}, a.options()).tril(tk - tq);
  }
  return a / (a.sum(-1, /*keepdim=*/true) + kEps);
}

torch::Tensor linear_attention_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    LinearAttentionState& state) {
  auto fq = elu_feature_map(q);                                    // [B,H,1,Dh]
  auto fk = elu_feature_map(k);
  auto kv = torch::matmul(fk.transpose(-2, -1), v);                // [B,H,Dh,Dv]
  auto zk = fk.squeeze(-2);                                        // [B,H,Dh]
  state.s = state.s.defined() ? state.s + kv : kv;
  state.z = state.z.defined() ? state.z + zk : zk;
  auto num = torch::matmul(fq, state.s);                           // [B,H,1,Dv]
  auto den = (fq * state.z.unsqueeze(-2)).sum(-1, /*keepdim=*/true) + kEps;
  return num / den;
}

void LinearDecodingState::reorder(const torch::Tensor& indices) {
  if (sums.s.defined()) sums.s = sums.s.index_select(0, indices);
  if (sums.z.defined()) sums.z = sums.z.index_select(0, indices);
}

void LinearDecodingState::add_rows(int64_t count) {
  auto grow = [&](torch::Tensor& t) {
    if (!t.defined() || count <= 0) return;
    auto shape = t.sizes().vec();
    shape[0] = count;
    t = torch::cat({t, torch::zeros(shape, t.options())});
  };
  grow(sums.s);
  grow(sums.z);
}

LinearAttentionState& LinearDecodingState::of(SelfAttentionCache& cache) {
  auto* state = dynamic_cast<LinearDecodingState*>(cache.state.get());
  TORCH_CHECK(state, "a linear-attention step on a cache made by another attention variant");
  return state->sums;
}

LinearSelfAttentionImpl::LinearSelfAttentionImpl(const MultiHeadAttentionOptions& options)
    : SelfAttentionImpl(options) {}

torch::Tensor LinearSelfAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                              const torch::Tensor& key_valid, bool causal, torch::Tensor* weights) {
  auto out = linear_attention(q, k, v, key_valid, causal);
  if (weights) *weights = linear_attention_weights(q, k, key_valid, causal);
  return out;
}

torch::Tensor LinearSelfAttentionImpl::attend_step(const torch::Tensor& q, const torch::Tensor& k,
                                                   const torch::Tensor& v, SelfAttentionCache& cache,
                                                   torch::Tensor* weights) {
  auto qh = split_heads(q), kh = split_heads(k), vh = split_heads(v);
  auto out = linear_attention_step(qh, kh, vh, LinearDecodingState::of(cache));
  if (weights) {
    // The recurrent state forgets the individual keys; keep them only when weights are wanted.
    cache.kv.append(step_heads(k), step_heads(v));
    *weights = linear_attention_weights(qh, cache.kv.gather().first, {}, false);
  }
  return merge_heads(out);
}

std::unique_ptr<VariantDecodingState> LinearSelfAttentionImpl::new_decoding_state() const {
  return std::make_unique<LinearDecodingState>();
}

}  // namespace parla::nn

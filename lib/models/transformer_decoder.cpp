#include "models/transformer_decoder.h"

#include <cstdlib>
#include <cstring>

#include <torch/torch.h>

#include "core/config/runtime_config.h"
#include "models/fused_decoder_step.h"
#include "nn/self_attention_factory.h"

namespace parla::models {

void TransformerDecoderCache::select_self(const torch::Tensor& rows) {
  for (auto& c : self) c.reorder(rows);
}

void TransformerDecoderCache::select_memory(const torch::Tensor& sentences) {
  for (auto& k : cross_k) k = k.index_select(0, sentences);
  for (auto& v : cross_v) v = v.index_select(0, sentences);
}

void TransformerDecoderCache::select_memory_rows(const torch::Tensor& sentences) {
  auto s = sentences.to(torch::kCPU, torch::kLong).contiguous();
  memory_rows = memory_rows.defined() ? memory_rows.index_select(0, s) : s.clone();
}

void TransformerDecoderCache::gather_memory(torch::Tensor& memory_valid) {
  if (!memory_rows.defined()) return;
  auto rows = memory_rows.to(memory_valid.device());
  memory_valid = memory_valid.index_select(0, rows);
  select_memory(rows);
  memory_rows = torch::Tensor();
}

TransformerDecoderLayerImpl::TransformerDecoderLayerImpl(const ModelConfig& cfg, int layer)
    : pre_norm_(cfg.norm == LayerNormPlacement::kPre), dropout_(cfg.dropout) {
  self_attn = register_module("self_attn", nn::make_self_attention(cfg, /*decoder=*/true, layer));
  nn::MultiHeadAttentionOptions cross;
  cross.d_model = cfg.d_model;
  cross.heads = cfg.heads;
  cross.dropout = cfg.attention_dropout;
  cross_attn = register_module("cross_attn", nn::CrossAttention(cross));  // always full attention over the source
  ffn = register_module("ffn", nn::FeedForward(cfg.d_model, cfg.ffn_dim, cfg.activation, cfg.activation_dropout));
  auto ln = [&] { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.d_model})); };
  self_attn_norm = register_module("self_attn_norm", ln());
  cross_attn_norm = register_module("cross_attn_norm", ln());
  ffn_norm = register_module("ffn_norm", ln());
}

template <class SelfAttention>
torch::Tensor TransformerDecoderLayerImpl::run(const torch::Tensor& x, SelfAttention&& self_attention,
                                               const torch::Tensor& mem_k, const torch::Tensor& mem_v,
                                               const torch::Tensor& memory_valid, torch::Tensor* cross_weights) {
  auto drop = [&](const torch::Tensor& t) { return dropout_ > 0 && is_training() ? torch::dropout(t, dropout_, true) : t; };
  auto cross = [&](const torch::Tensor& h) { return cross_attn->cross_attend(h, mem_k, mem_v, memory_valid, cross_weights); };
  torch::Tensor h = x;
  if (pre_norm_) {
    h = h + drop(self_attention(self_attn_norm(h)));
    h = h + drop(cross(cross_attn_norm(h)));
    h = h + drop(ffn(ffn_norm(h)));
  } else {
    h = self_attn_norm(h + drop(self_attention(h)));
    h = cross_attn_norm(h + drop(cross(h)));
    h = ffn_norm(h + drop(ffn(h)));
  }
  return h;
}

torch::Tensor TransformerDecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& mem_k,
                                                   const torch::Tensor& mem_v, const torch::Tensor& memory_valid,
                                                   torch::Tensor* cross_weights) {
  // Right-padded targets need no padding mask: the causal mask already hides later (padding) positions from
  // every real position, and outputs at padding positions are ignored by the loss.
  return run(x, [&](const torch::Tensor& h) { return self_attn->self_attend(h, {}, true); }, mem_k, mem_v,
             memory_valid, cross_weights);
}

torch::Tensor TransformerDecoderLayerImpl::step(const torch::Tensor& x, nn::SelfAttentionCache& cache,
                                                const torch::Tensor& mem_k, const torch::Tensor& mem_v,
                                                const torch::Tensor& memory_valid, torch::Tensor* cross_weights) {
  return run(x, [&](const torch::Tensor& h) { return self_attn->self_attend_step(h, cache); }, mem_k, mem_v,
             memory_valid, cross_weights);
}

TransformerDecoderImpl::TransformerDecoderImpl(const ModelConfig& cfg) {
  fused_step_ = applied_runtime().fused_decoder_step;
  layers = register_module("layers", torch::nn::ModuleList());
  for (int i = 0; i < cfg.decoder_layers; ++i) layers->push_back(TransformerDecoderLayer(cfg, i));
  if (cfg.norm == LayerNormPlacement::kPre)
    final_norm = register_module("final_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.d_model})));
}

torch::Tensor TransformerDecoderImpl::forward(const torch::Tensor& x, const torch::Tensor& memory,
                                              const torch::Tensor& memory_valid, torch::Tensor* cross_weights) {
  torch::Tensor h = x;
  const size_t n = layers->size();
  for (size_t i = 0; i < n; ++i) {
    auto layer = layers->ptr<TransformerDecoderLayerImpl>(i);
    auto [k, v] = layer->cross_attn->project_memory(memory);
    h = layer->forward(h, k, v, memory_valid, i + 1 == n ? cross_weights : nullptr);
  }
  if (final_norm) h = final_norm(h);
  return h;
}

TransformerDecoderCache TransformerDecoderImpl::start(const torch::Tensor& memory) {
  TransformerDecoderCache cache;
  cache.self.resize(layers->size());
  for (size_t i = 0; i < layers->size(); ++i) {
    auto [k, v] = layers->ptr<TransformerDecoderLayerImpl>(i)->cross_attn->project_memory(memory);
    cache.cross_k.push_back(k);
    cache.cross_v.push_back(v);
  }
  return cache;
}

bool TransformerDecoderImpl::fused_step_for(const torch::Tensor& x, bool cross_weights) const {
  return fused_step_ && !cross_weights && fused_step_applies(*this, x);
}

torch::Tensor TransformerDecoderImpl::step(const torch::Tensor& x, TransformerDecoderCache& cache,
                                           const torch::Tensor& memory_valid, torch::Tensor* cross_weights) {
  if (fused_step_for(x, cross_weights != nullptr)) return fused_decoder_step(*this, x, cache, memory_valid);
  // The modules read the memory rows in order: renumbered ones are gathered for this step (TransformerModel
  // gathers them into its state once, before a step that is not fused, so this only serves direct callers).
  torch::Tensor rows, valid = memory_valid;
  if (cache.memory_rows.defined()) {
    rows = cache.memory_rows.to(x.device());
    valid = memory_valid.index_select(0, rows);
  }
  torch::Tensor h = x;
  const size_t n = layers->size();
  for (size_t i = 0; i < n; ++i) {
    auto k = rows.defined() ? cache.cross_k[i].index_select(0, rows) : cache.cross_k[i];
    auto v = rows.defined() ? cache.cross_v[i].index_select(0, rows) : cache.cross_v[i];
    h = layers->ptr<TransformerDecoderLayerImpl>(i)->step(h, cache.self[i], k, v, valid,
                                                          i + 1 == n ? cross_weights : nullptr);
  }
  if (final_norm) h = final_norm(h);
  return h;
}

}  // namespace parla::models

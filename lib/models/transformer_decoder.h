#pragma once
// The Transformer decoder stack (Vaswani et al. 2017, Sec. 3.1): masked (causal) self-attention, cross-attention
// over the encoder output, feed-forward; post- or pre-norm as in the encoder. Runs either over a whole target
// prefix (training) or one position at a time with per-layer caches (decoding): the self-attention key/value
// cache grows by one position per step, the cross-attention keys/values are computed once per sentence.
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/normalization.h>
#include <torch/types.h>

#include "core/config/model_config.h"
#include "nn/feed_forward.h"
#include "nn/cross_attention.h"
#include "nn/self_attention.h"
#include "nn/self_attention_cache.h"

namespace parla::models {

// The decoder's incremental state, one entry per layer.
struct TransformerDecoderCache {
  std::vector<nn::SelfAttentionCache> self;
  std::vector<torch::Tensor> cross_k, cross_v;  // [M, H, S, Dh]: one row per sentence (M = N / beam, or see below)
  // int64 [N / beam] on the CPU or undefined: the row of cross_k/cross_v (and of the source mask that goes with
  // them) each sentence reads. Where sentences leave a batch on the CPU the rows are renumbered rather than copied
  // (select_memory_rows); undefined: sentence g reads row g.
  torch::Tensor memory_rows;
  std::vector<float> workspace;  // the fused step's buffers (models/fused_decoder_step.h)
  void select_self(const torch::Tensor& rows);         // hypothesis rows of the self-attention caches
  void select_memory(const torch::Tensor& sentences);  // rows of the cross-attention keys/values, copied
  void select_memory_rows(const torch::Tensor& sentences);  // the same by renumbering memory_rows
  // The rows memory_rows names copied out of cross_k/cross_v and `memory_valid` (its source mask), memory_rows
  // cleared: for every reader but the fused step.
  void gather_memory(torch::Tensor& memory_valid);
};

class TransformerDecoderLayerImpl : public torch::nn::Module {
 public:
  // `layer` (0-based) seeds the layer's own random draws (sparse, performer, routing attention).
  TransformerDecoderLayerImpl(const ModelConfig& cfg, int layer);
  // Whole prefix: x [B, T, D], memory keys/values from cross_attn->project_memory, memory_valid [B, S].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mem_k, const torch::Tensor& mem_v,
                        const torch::Tensor& memory_valid, torch::Tensor* cross_weights = nullptr);
  // One position: x [N, 1, D].
  torch::Tensor step(const torch::Tensor& x, nn::SelfAttentionCache& cache, const torch::Tensor& mem_k,
                     const torch::Tensor& mem_v, const torch::Tensor& memory_valid, torch::Tensor* cross_weights);

  bool pre_norm() const { return pre_norm_; }

  nn::SelfAttention self_attn{nullptr};  // the variant model.decoder_attention chooses
  nn::CrossAttention cross_attn{nullptr};
  nn::FeedForward ffn{nullptr};
  torch::nn::LayerNorm self_attn_norm{nullptr}, cross_attn_norm{nullptr}, ffn_norm{nullptr};

 private:
  template <class SelfAttention>
  torch::Tensor run(const torch::Tensor& x, SelfAttention&& self_attention, const torch::Tensor& mem_k,
                    const torch::Tensor& mem_v, const torch::Tensor& memory_valid, torch::Tensor* cross_weights);
  bool pre_norm_;
  double dropout_;
};
TORCH_MODULE(TransformerDecoderLayer);

class TransformerDecoderImpl : public torch::nn::Module {
 public:
  explicit TransformerDecoderImpl(const ModelConfig& cfg);
  // Embedded target prefix x [B, T, D] over encoder output memory [B, S, D] -> hidden [B, T, D].
  // `cross_weights` receives the last layer's cross-attention weights [B, H, T, S].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& memory, const torch::Tensor& memory_valid,
                        torch::Tensor* cross_weights = nullptr);
  // Fresh cache with the cross-attention keys/values of `memory`.
  TransformerDecoderCache start(const torch::Tensor& memory);
  // One position x [N, 1, D] -> [N, 1, D]. On the CPU in inference this is the fused step
  // (models/fused_decoder_step.h) wherever it applies: the same bits with far fewer LibTorch calls.
  torch::Tensor step(const torch::Tensor& x, TransformerDecoderCache& cache, const torch::Tensor& memory_valid,
                     torch::Tensor* cross_weights = nullptr);

  // Whether step() may take the fused path (runtime.fused_decoder_step at construction; false always runs the
  // modules, to compare).
  void use_fused_step(bool on) { fused_step_ = on; }
  // Whether step(x, ..., cross_weights) takes the fused path.
  bool fused_step_for(const torch::Tensor& x, bool cross_weights) const;

  torch::nn::ModuleList layers;
  torch::nn::LayerNorm final_norm{nullptr};  // pre-norm only

 private:
  bool fused_step_;
};
TORCH_MODULE(TransformerDecoder);

}  // namespace parla::models

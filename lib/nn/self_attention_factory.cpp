#include "nn/self_attention_factory.h"

#include <algorithm>
#include <memory>

#include "core/error.h"
#include "nn/full_attention.h"
#include "nn/linear_attention.h"
#include "nn/local_attention.h"
#include "nn/nystrom_attention.h"
#include "nn/performer_attention.h"
#include "nn/routing_attention.h"
#include "nn/sparse_attention.h"

namespace parla::nn {

namespace self_attention_factory_impl {

template <class Variant, class... Options>
SelfAttention make(const MultiHeadAttentionOptions& shared, const Options&... options) {
  // Through the base pointer: ModuleHolder's forwarding constructor would take a derived one as an argument.
  return SelfAttention(std::shared_ptr<SelfAttentionImpl>(std::make_shared<Variant>(shared, options...)));
}

}  // namespace self_attention_factory_impl

SparsePattern sparse_pattern_of(const ModelConfig& cfg) {
  auto has = [&](AtomicSparsePattern atom) {
    return std::find(cfg.sparse_pattern.begin(), cfg.sparse_pattern.end(), atom) != cfg.sparse_pattern.end();
  };
  SparsePattern p;
  p.band = has(AtomicSparsePattern::kBand);
  p.window = cfg.local_window;
  p.global = has(AtomicSparsePattern::kGlobal);
  p.global_tokens = cfg.sparse_global_tokens;
  p.dilated = has(AtomicSparsePattern::kDilated);
  p.dilation = cfg.sparse_dilation;
  p.dilated_window = cfg.sparse_dilated_window;
  p.random = has(AtomicSparsePattern::kRandom);
  p.random_blocks = cfg.sparse_random_blocks;
  p.block_local = has(AtomicSparsePattern::kBlock);
  p.block_size = cfg.sparse_block_size;
  p.seed = static_cast<uint64_t>(cfg.attention_seed);
  return p;
}

SelfAttention make_self_attention(AttentionKind kind, const MultiHeadAttentionOptions& shared, const ModelConfig& cfg) {
  using self_attention_factory_impl::make;
  switch (kind) {
    case AttentionKind::kInherit: break;  // a key's value, resolved by ModelConfig::self_attention
    case AttentionKind::kFull: return make<FullSelfAttentionImpl>(shared);
    case AttentionKind::kLocal: return make<LocalSelfAttentionImpl>(shared, LocalAttentionOptions{cfg.local_window});
    case AttentionKind::kLinear: return make<LinearSelfAttentionImpl>(shared);
    case AttentionKind::kSparse:
      return make<SparseSelfAttentionImpl>(shared, sparse_pattern_of(cfg));
    case AttentionKind::kRouting:
      return make<RoutingSelfAttentionImpl>(shared, RoutingAttentionOptions{cfg.routing_clusters, cfg.routing_decay});
    case AttentionKind::kPerformer:
      return make<PerformerSelfAttentionImpl>(
          shared, PerformerAttentionOptions{cfg.performer_features, cfg.performer_redraw_every});
    case AttentionKind::kNystrom:
      return make<NystromSelfAttentionImpl>(
          shared, NystromAttentionOptions{cfg.nystrom_landmarks, cfg.nystrom_pinv_iterations, cfg.nystrom_conv_kernel});
  }
  throw ConfigError("key 'model.attention': no attention kind given");
}

SelfAttention make_self_attention(const ModelConfig& cfg, bool decoder, int layer) {
  MultiHeadAttentionOptions shared;
  shared.d_model = cfg.d_model;
  shared.heads = cfg.heads;
  shared.dropout = cfg.attention_dropout;
  // One stream per layer and stack.
  shared.seed = static_cast<uint64_t>(cfg.attention_seed) * 1000003ULL + (decoder ? 1000ULL : 0ULL) + layer;
  return make_self_attention(cfg.self_attention(decoder), shared, cfg);
}

}  // namespace parla::nn

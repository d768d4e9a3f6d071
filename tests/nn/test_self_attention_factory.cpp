// The self-attention factory (nn/self_attention_factory.h): which variant each config builds, with which settings,
// and that every variant's parameters and buffers keep the names, order and shapes that checkpoints hold.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "nn/cross_attention.h"
#include "nn/full_attention.h"
#include "nn/linear_attention.h"
#include "nn/local_attention.h"
#include "nn/nystrom_attention.h"
#include "nn/performer_attention.h"
#include "nn/routing_attention.h"
#include "nn/self_attention_factory.h"
#include "nn/sparse_attention.h"

namespace parla_test_self_attention_factory {

using namespace parla::nn;
using parla::AttentionKind;

// named_parameters() then named_buffers(), one "P|B name [shape]" line each: what a checkpoint stores, in the
// order the optimizer's state follows.
std::string listing(torch::nn::Module& m) {
  std::ostringstream o;
  o << "\n";
  for (auto& p : m.named_parameters(true)) o << "P " << p.key() << " " << p.value().sizes() << "\n";
  for (auto& b : m.named_buffers(true)) o << "B " << b.key() << " " << b.value().sizes() << "\n";
  return o.str();
}

// Recorded from the code before issue 38 (commit 1e20905, where one MultiHeadAttention with an options struct for
// every variant held all their state): a layer built with d_model 16, 4 heads, 3 routing clusters, 8 performer
// features, 4 nystrom landmarks and a nystrom convolution kernel of 3, printed by listing() from a program linked
// against that commit's libparla.a. Full, local, linear, sparse and nystrom without convolution have no state
// of their own; nystrom's convolution comes first because a module lists its own parameters before its children's.
const char* const kQkvOut = R"(
P qkv_proj.weight [48, 16]
P qkv_proj.bias [48]
P out_proj.weight [16, 16]
P out_proj.bias [16]
)";

const char* const kRouting = R"(
P qkv_proj.weight [48, 16]
P qkv_proj.bias [48]
P out_proj.weight [16, 16]
P out_proj.bias [16]
B routing_centroids [4, 3, 4]
B routing_sums [4, 3, 4]
B routing_counts [4, 3]
)";

const char* const kPerformer = R"(
P qkv_proj.weight [48, 16]
P qkv_proj.bias [48]
P out_proj.weight [16, 16]
P out_proj.bias [16]
B performer_features [8, 4]
B performer_passes []
)";

const char* const kNystrom = R"(
P nystrom_conv [4, 1, 3, 1]
P qkv_proj.weight [48, 16]
P qkv_proj.bias [48]
P out_proj.weight [16, 16]
P out_proj.bias [16]
)";

const char* const kCross = R"(
P q_proj.weight [16, 16]
P q_proj.bias [16]
P kv_proj.weight [32, 16]
P kv_proj.bias [32]
P out_proj.weight [16, 16]
P out_proj.bias [16]
)";

parla::ModelConfig small_config() {
  parla::ModelConfig c;
  c.d_model = 16;
  c.heads = 4;
  c.routing_clusters = 3;
  c.performer_features = 8;
  c.nystrom_landmarks = 4;
  c.nystrom_conv_kernel = 3;
  return c;
}

MultiHeadAttentionOptions small_shared() {
  MultiHeadAttentionOptions o;
  o.d_model = 16;
  o.heads = 4;
  return o;
}

TEST_CASE("every self-attention variant keeps the parameter and buffer names, order and shapes of checkpoints") {
  const auto cfg = small_config();
  const std::vector<std::pair<AttentionKind, const char*>> expected = {
      {AttentionKind::kFull, kQkvOut},       {AttentionKind::kLocal, kQkvOut},
      {AttentionKind::kLinear, kQkvOut},     {AttentionKind::kSparse, kQkvOut},
      {AttentionKind::kRouting, kRouting},   {AttentionKind::kPerformer, kPerformer},
      {AttentionKind::kNystrom, kNystrom}};
  for (const auto& [kind, names] : expected) {
    INFO("kind " << static_cast<int>(kind));
    auto layer = make_self_attention(kind, small_shared(), cfg);
    CHECK(listing(*layer) == names);
  }
  auto no_conv = cfg;
  no_conv.nystrom_conv_kernel = 0;
  CHECK(listing(*make_self_attention(AttentionKind::kNystrom, small_shared(), no_conv)) == kQkvOut);
  CrossAttention cross(small_shared());
  CHECK(listing(*cross) == kCross);
}

TEST_CASE("the factory builds the variant each attention name chooses, with the variant's own settings") {
  auto cfg = small_config();
  const MultiHeadAttentionOptions shared = small_shared();
  // The names the config reads (model.*attention) choose the variants.
  auto kind = [](const char* name) {
    parla::config::ConfigBuilder b;
    b.set("model.encoder_attention", name, "test");
    return b.build().model.encoder_attention;
  };
  CHECK(make_self_attention(kind("full"), shared, cfg)->as<FullSelfAttentionImpl>());
  CHECK(make_self_attention(kind("local"), shared, cfg)->as<LocalSelfAttentionImpl>());
  CHECK(make_self_attention(kind("linear"), shared, cfg)->as<LinearSelfAttentionImpl>());
  CHECK(make_self_attention(kind("sparse"), shared, cfg)->as<SparseSelfAttentionImpl>());
  CHECK(make_self_attention(kind("routing"), shared, cfg)->as<RoutingSelfAttentionImpl>());
  CHECK(make_self_attention(kind("performer"), shared, cfg)->as<PerformerSelfAttentionImpl>());
  CHECK(make_self_attention(kind("nystrom"), shared, cfg)->as<NystromSelfAttentionImpl>());
  REQUIRE_THROWS_AS(kind("fast"), parla::ConfigError);
  REQUIRE_THROWS_WITH(kind("fast"), Catch::Contains("model.encoder_attention"));
  REQUIRE_THROWS_AS(make_self_attention(parla::AttentionKind::kInherit, shared, cfg), parla::ConfigError);
  CHECK(attention_kind_is_causal(AttentionKind::kSparse));
  CHECK_FALSE(attention_kind_is_causal(AttentionKind::kNystrom));
  // The variants' settings come from their own keys.
  cfg.routing_clusters = 5;
  cfg.performer_features = 6;
  auto routing = make_self_attention(AttentionKind::kRouting, shared, cfg);
  CHECK(routing->as<RoutingSelfAttentionImpl>()->routing_centroids.size(1) == 5);
  auto performer = make_self_attention(AttentionKind::kPerformer, shared, cfg);
  CHECK(performer->as<PerformerSelfAttentionImpl>()->performer_features.size(0) == 6);
  cfg.sparse_pattern = {};
  REQUIRE_THROWS_WITH(make_self_attention(AttentionKind::kSparse, shared, cfg), Catch::Contains("model.sparse_pattern"));
}

TEST_CASE("each stack's layer gets its stack's attention and a seed of its own") {
  auto cfg = small_config();
  cfg.attention = AttentionKind::kLinear;
  cfg.encoder_attention = AttentionKind::kNystrom;
  cfg.attention_seed = 3;
  cfg.attention_dropout = 0.25;
  auto encoder1 = make_self_attention(cfg, /*decoder=*/false, 1);
  auto decoder2 = make_self_attention(cfg, /*decoder=*/true, 2);
  CHECK(encoder1->as<NystromSelfAttentionImpl>());
  CHECK(decoder2->as<LinearSelfAttentionImpl>());  // model.decoder_attention "" falls back to model.attention
  CHECK(encoder1->options().seed == 3 * 1000003ULL + 1);
  CHECK(decoder2->options().seed == 3 * 1000003ULL + 1000 + 2);
  CHECK(decoder2->options().d_model == 16);
  CHECK(decoder2->options().heads == 4);
  CHECK(decoder2->options().dropout == 0.25);
}

}  // namespace parla_test_self_attention_factory

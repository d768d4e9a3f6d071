// The efficient self-attention variants inside multi-head attention (issue 14): incremental decoding, padding,
// the state that training moves (routing's centroids, performer's redraws) and the config keys that choose them.
// The variants' own maths is tested against brute force in test_{sparse,routing,performer,nystrom}_attention.cpp.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "nn/linear_attention.h"
#include "nn/performer_attention.h"
#include "nn/routing_attention.h"
#include "nn/self_attention_cache.h"
#include "nn/self_attention_factory.h"
#include "support/tensors.h"

namespace parla_test_attention_variants {

using namespace parla::nn;
using parla::AttentionKind;
using parla::attention_kind_is_causal;
using parla::testing::max_abs_diff;

// The variants' own settings, as the factory reads them from the model config.
parla::ModelConfig variant_config() {
  parla::ModelConfig c;
  c.local_window = 1;
  // Small blocks and sizes so that every pattern leaves some pairs out of sequences of ~10 positions.
  c.sparse_pattern = {parla::AtomicSparsePattern::kBand, parla::AtomicSparsePattern::kGlobal,
                      parla::AtomicSparsePattern::kRandom};
  c.sparse_block_size = 2;
  c.routing_clusters = 3;
  c.performer_features = 32;
  c.nystrom_landmarks = 3;
  c.nystrom_conv_kernel = 3;
  return c;
}

SelfAttention variant(AttentionKind kind, const parla::ModelConfig& cfg = variant_config()) {
  MultiHeadAttentionOptions o;
  o.d_model = 16;
  o.heads = 4;
  o.seed = 5;
  return make_self_attention(kind, o, cfg);
}

const std::vector<AttentionKind> kCausalKinds = {AttentionKind::kFull,    AttentionKind::kLocal,
                                                 AttentionKind::kLinear,  AttentionKind::kSparse,
                                                 AttentionKind::kRouting, AttentionKind::kPerformer};

TEST_CASE("incremental steps of sparse, routing and performer self-attention equal the causal full pass") {
  torch::manual_seed(21);
  for (auto kind : {AttentionKind::kSparse, AttentionKind::kRouting, AttentionKind::kPerformer}) {
    auto mha = variant(kind);
    mha->eval();
    auto x = torch::randn({3, 9, 16});
    torch::Tensor full_weights;
    auto full = mha->self_attend(x, {}, true, &full_weights);
    SelfAttentionCache cache;
    torch::NoGradGuard no_grad;
    for (int t = 0; t < 9; ++t) {
      INFO("kind " << static_cast<int>(kind) << " step " << t);
      torch::Tensor w;
      auto step = mha->self_attend_step(x.narrow(1, t, 1), cache, &w);
      REQUIRE(max_abs_diff(step, full.narrow(1, t, 1)) < 1e-5);
      // The step's weights over the t + 1 cached keys are row t of the full pass's.
      REQUIRE(max_abs_diff(w.squeeze(2), full_weights.select(2, t).narrow(2, 0, t + 1)) < 1e-5);
    }
  }
}

TEST_CASE("each variant makes its own decoding state at a cache's first step: running sums for linear and "
          "performer, nothing beside the key/value cache for the others") {
  for (auto kind : kCausalKinds) {
    INFO("kind " << parla::config::name_of(kind));
    auto mha = variant(kind);
    mha->eval();
    torch::NoGradGuard no_grad;
    SelfAttentionCache cache;
    mha->self_attend_step(torch::randn({2, 1, 16}), cache);
    const bool sums = kind == AttentionKind::kLinear || kind == AttentionKind::kPerformer;
    CHECK(static_cast<bool>(dynamic_cast<LinearDecodingState*>(cache.state.get())) == sums);
    CHECK(static_cast<bool>(cache.state) == sums);
    if (sums) CHECK(LinearDecodingState::of(cache).s.size(0) == 2);
  }
}

TEST_CASE("beam reordering of a sparse or routing cache equals decoding the reordered rows") {
  torch::manual_seed(22);
  for (auto kind : {AttentionKind::kSparse, AttentionKind::kRouting, AttentionKind::kPerformer}) {
    auto mha = variant(kind);
    mha->eval();
    torch::NoGradGuard no_grad;
    auto x = torch::randn({3, 6, 16});
    auto order = torch::tensor({2, 2, 0}, torch::kLong);
    SelfAttentionCache cache;
    for (int t = 0; t < 4; ++t) mha->self_attend_step(x.narrow(1, t, 1), cache);
    cache.reorder(order);
    auto reordered = x.index_select(0, order);
    auto full = mha->self_attend(reordered, {}, true);
    for (int t = 4; t < 6; ++t) {
      auto step = mha->self_attend_step(reordered.narrow(1, t, 1), cache);
      REQUIRE(max_abs_diff(step, full.narrow(1, t, 1)) < 1e-5);
    }
  }
}

TEST_CASE("every self-attention variant gives a sentence alone the output it has in a padded batch of 64") {
  torch::manual_seed(23);
  std::vector<AttentionKind> kinds = kCausalKinds;
  kinds.push_back(AttentionKind::kNystrom);
  const int64_t B = 64, T = 12;
  auto lengths = torch::randint(1, T + 1, {B}, torch::kLong);
  lengths[5] = T;
  auto valid = torch::arange(T).unsqueeze(0) < lengths.unsqueeze(1);  // [B, T]
  auto x = torch::randn({B, T, 16}, torch::kDouble);
  for (auto kind : kinds) {
    auto mha = variant(kind);
    mha->to(torch::kDouble);
    mha->eval();
    for (bool causal : {false, true}) {
      if (causal && !attention_kind_is_causal(kind)) continue;
      auto batch = mha->self_attend(x, valid, causal);
      for (int64_t b : {0, 5, 17, 63}) {
        const int64_t n = lengths[b].item<int64_t>();
        auto alone = mha->self_attend(x[b].narrow(0, 0, n).unsqueeze(0), {}, causal);
        INFO("kind " << static_cast<int>(kind) << " causal " << causal << " row " << b << " length " << n);
        REQUIRE(max_abs_diff(alone[0], batch[b].narrow(0, 0, n)) < 1e-9);
      }
    }
  }
}

TEST_CASE("routing centroids follow the batches in training and stay fixed in evaluation") {
  torch::manual_seed(24);
  auto mha = variant(AttentionKind::kRouting);
  auto* routing = mha->as<RoutingSelfAttentionImpl>();
  REQUIRE(routing);
  auto x = torch::randn({2, 8, 16});
  const auto before = routing->routing_centroids.clone();
  mha->eval();
  mha->self_attend(x, {}, false);
  REQUIRE(routing->routing_centroids.equal(before));
  mha->train();
  mha->self_attend(x, {}, false);
  REQUIRE(!routing->routing_centroids.equal(before));
  // Eq. 10: the centroids are the moving sums over the moving counts.
  auto ratio = routing->routing_sums / routing->routing_counts.unsqueeze(-1);
  REQUIRE(max_abs_diff(ratio, routing->routing_centroids) < 1e-5);
  // No gradient reaches the centroids; the layer's weights still get theirs.
  auto y = mha->self_attend(x.requires_grad_(true), {}, false);
  y.sum().backward();
  REQUIRE(!routing->routing_centroids.requires_grad());
  REQUIRE(mha->qkv_proj->weight.grad().defined());
}

TEST_CASE("performer features are redrawn every performer_redraw_every training passes, the same in every replica") {
  torch::manual_seed(25);
  auto cfg = variant_config();
  cfg.performer_redraw_every = 3;
  auto layer_a = variant(AttentionKind::kPerformer, cfg), layer_b = variant(AttentionKind::kPerformer, cfg);
  auto *a = layer_a->as<PerformerSelfAttentionImpl>(), *b = layer_b->as<PerformerSelfAttentionImpl>();
  REQUIRE((a && b));
  REQUIRE(a->performer_features.equal(b->performer_features));  // a function of the seed, not of the global RNG
  auto x = torch::randn({1, 5, 16});
  a->eval();
  for (int i = 0; i < 5; ++i) a->self_attend(x, {}, false);
  REQUIRE(a->performer_passes.item<int64_t>() == 0);  // evaluation neither counts nor redraws
  a->train();
  std::vector<torch::Tensor> seen = {a->performer_features.clone()};
  for (int pass = 1; pass <= 7; ++pass) {
    a->self_attend(x, {}, false);
    seen.push_back(a->performer_features.clone());
  }
  // The draw in force at pass p (1-based) is redrawn before passes 4 and 7: after 3 and 6 completed passes.
  for (int pass = 1; pass <= 7; ++pass) {
    const bool redrawn = pass == 4 || pass == 7;
    INFO("pass " << pass);
    REQUIRE(seen[pass].equal(seen[pass - 1]) == !redrawn);
  }
  b->train();
  for (int pass = 1; pass <= 7; ++pass) b->self_attend(x, {}, false);
  REQUIRE(b->performer_features.equal(a->performer_features));
  REQUIRE(a->performer_passes.item<int64_t>() == 7);
}

TEST_CASE("local attention runs blockwise and equals the band mask applied to full attention") {
  torch::manual_seed(26);
  auto cfg = variant_config();
  cfg.local_window = 3;
  auto local = variant(AttentionKind::kLocal, cfg);
  local->to(torch::kDouble);
  auto x = torch::randn({2, 40, 16}, torch::kDouble);
  auto valid = torch::ones({2, 40}, torch::kBool);
  valid[1].narrow(0, 29, 11).fill_(false);
  for (bool causal : {false, true}) {
    torch::Tensor w;
    auto out = local->self_attend(x, valid, causal, &w);
    for (int64_t i = 0; i < 29; ++i)
      for (int64_t j = 0; j < 40; ++j) {
        const bool allowed = std::abs(i - j) <= 3 && (!causal || j <= i) && j < 29;
        REQUIRE((w[1][0][i][j].item<double>() > 0) == allowed);
      }
    (void)out;
  }
}

// The message of the ConfigError that building a config with these keys throws ("" when none is thrown).
std::string config_error(const std::vector<std::pair<std::string, parla::config::json>>& keys) {
  parla::config::ConfigBuilder b;
  try {
    for (const auto& [key, value] : keys) b.set(key, value, "test");  // a key's own range is checked here
    b.build();                                                         // the rules across keys here
  } catch (const parla::ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("model.sparse_pattern is read as its patterns' enum and written back by their names, in its order") {
  parla::config::ConfigBuilder b;
  b.set("model.sparse_pattern", parla::config::json::array({"dilated", "block", "band"}), "test");
  const auto cfg = b.build();
  using parla::AtomicSparsePattern;
  const std::vector<AtomicSparsePattern> read{AtomicSparsePattern::kDilated, AtomicSparsePattern::kBlock,
                                              AtomicSparsePattern::kBand};
  REQUIRE((cfg.model.sparse_pattern == read));
  CHECK(parla::ModelConfig::schema().to_json(cfg.model)["sparse_pattern"] ==
        parla::config::json::array({"dilated", "block", "band"}));
  CHECK(parla::ModelConfig::schema().to_json(parla::ModelConfig{})["sparse_pattern"] ==
        parla::config::json::array({"band", "global", "random"}));
  const auto p = parla::nn::sparse_pattern_of(cfg.model);
  CHECK((p.dilated && p.block_local && p.band && !p.global && !p.random));
}

TEST_CASE("bad attention keys are config errors naming the key") {
  using parla::config::json;
  auto contains = [](const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; };
  REQUIRE(config_error({{"model.encoder_attention", "nystrom"}, {"model.decoder_attention", "sparse"}}).empty());
  REQUIRE(contains(config_error({{"model.decoder_attention", "nystrom"}}), "model.decoder_attention"));
  REQUIRE(contains(config_error({{"model.attention", "nystrom"}}), "model.attention"));
  REQUIRE(contains(config_error({{"model.attention", "sparse"}, {"model.sparse_pattern", json::array({"band", "stripes"})}}),
                   "model.sparse_pattern"));
  REQUIRE(contains(config_error({{"model.attention", "sparse"}, {"model.sparse_pattern", json::array()}}),
                   "model.sparse_pattern"));
  REQUIRE(contains(config_error({{"model.sparse_pattern", json::array({"band", "globl"})}}), "did you mean 'global'"));
  REQUIRE(contains(config_error({{"model.sparse_pattern", "band"}}), "model.sparse_pattern"));  // not a list
  REQUIRE(contains(config_error({{"model.sparse_block_size", 0}}), "model.sparse_block_size"));
  REQUIRE(contains(config_error({{"model.sparse_random_blocks", -1}}), "model.sparse_random_blocks"));
  REQUIRE(contains(config_error({{"model.routing_clusters", 0}}), "model.routing_clusters"));
  REQUIRE(contains(config_error({{"model.routing_decay", 1.0}}), "model.routing_decay"));
  REQUIRE(contains(config_error({{"model.performer_features", 0}}), "model.performer_features"));
  REQUIRE(contains(config_error({{"model.performer_redraw_every", -2}}), "model.performer_redraw_every"));
  REQUIRE(contains(config_error({{"model.nystrom_landmarks", 0}}), "model.nystrom_landmarks"));
  REQUIRE(contains(config_error({{"model.nystrom_conv_kernel", 4}}), "model.nystrom_conv_kernel"));
  REQUIRE(contains(config_error({{"model.encoder_attention", "nystrom"}, {"model.nystrom_landmarks", 5000}}),
                   "model.nystrom_landmarks"));
  REQUIRE(contains(config_error({{"model.attention", "routing"}, {"model.routing_clusters", 5000}}),
                   "model.routing_clusters"));
}

}  // namespace parla_test_attention_variants

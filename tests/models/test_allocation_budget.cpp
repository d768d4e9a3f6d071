// module_overhead_bytes: what a model's layers take beyond their tensors, counted against a checkpoint's budget.
// The estimate must not be below what building the layers really costs: measured here as the growth of the
// process's resident memory while a model of 1,000 + 1,000 layers of width 1 is built and kept (a naive reference:
// its tensors are a few bytes each, so nearly all of it is module overhead).
#include <catch2/catch.hpp>

#include "models/allocation_budget.h"
#include "models/factory.h"
#include "models/tiny_config.h"
#include "support/resident_memory.h"

using namespace parla::models;

TEST_CASE("the per-layer overhead of the allocation budget covers what building the layers takes") {
  auto cfg = parla::testing::tiny_transformer();
  cfg.d_model = 1;
  cfg.ffn_dim = 1;
  cfg.heads = 1;
  cfg.encoder_layers = 1000;
  cfg.decoder_layers = 1000;
  const uint64_t estimate = module_overhead_bytes(cfg);
  CHECK(estimate == 1000 * kEncoderLayerOverhead + 1000 * kDecoderLayerOverhead);
  const long before = parla::testing::resident_process_kb();
  auto model = build_seq2seq(cfg, 8, 8);
  const long after = parla::testing::resident_process_kb();
  INFO("resident growth " << (after - before) << " kB, estimate " << (estimate >> 10) << " kB");
  CHECK(static_cast<uint64_t>(after - before) * 1024 <= estimate);

  cfg.type = parla::ModelType::kBert;
  CHECK(module_overhead_bytes(cfg) == 1000 * kEncoderLayerOverhead);
  cfg.type = parla::ModelType::kRnn;
  cfg.rnn_layers = 7;
  CHECK(module_overhead_bytes(cfg) == 7 * kRnnLayerOverhead);
}

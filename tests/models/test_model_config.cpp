// The model config section: presets and cross-key checks.
#include <catch2/catch.hpp>

#include "core/config.h"
#include "core/error.h"

using parla::config::ConfigBuilder;
using parla::config::json;

TEST_CASE("presets fill the size keys the user did not set, with the paper's base and big sizes") {
  ConfigBuilder b;
  b.set("model.preset", "big", "test");
  b.set("model.encoder_layers", 2, "test");
  auto m = b.build().model;
  CHECK(m.d_model == 1024);
  CHECK(m.ffn_dim == 4096);
  CHECK(m.heads == 16);
  CHECK(m.dropout == 0.3);
  CHECK(m.decoder_layers == 6);
  CHECK(m.encoder_layers == 2);  // given explicitly: kept

  ConfigBuilder base;
  base.set("model.preset", "base", "test");
  auto mb = base.build().model;
  CHECK((mb.d_model == 512 && mb.ffn_dim == 2048 && mb.heads == 8 && mb.encoder_layers == 6 && mb.dropout == 0.1));

  ConfigBuilder tiny;
  tiny.set("model.preset", "tiny", "test");
  tiny.set("model.d_model", 64, "test");
  auto mt = tiny.build().model;
  CHECK(mt.d_model == 64);
  CHECK(mt.d_model < 512);
  CHECK(mt.encoder_layers < 6);
}

TEST_CASE("d_model not divisible by heads is a ConfigError naming the key") {
  ConfigBuilder b;
  b.set("model.d_model", 100, "test");
  b.set("model.heads", 8, "test");
  try {
    b.build();
    FAIL("expected a ConfigError");
  } catch (const parla::ConfigError& e) {
    CHECK(std::string(e.what()).find("model.d_model") != std::string::npos);
  }
}

TEST_CASE("model keys reject values outside their choices") {
  ConfigBuilder b;
  CHECK_THROWS_AS(b.set("model.attention", "reformer", "test"), parla::ConfigError);
  CHECK_THROWS_AS(b.set("model.norm", "middle", "test"), parla::ConfigError);
  CHECK_THROWS_AS(b.set("model.decoder_attention", "reformer", "test"), parla::ConfigError);
  CHECK_THROWS_AS(b.set("model.rnn_cell", "tanh", "test"), parla::ConfigError);
  CHECK_THROWS_AS(b.set("model.local_window", 0, "test"), parla::ConfigError);
}

TEST_CASE("word dropout keys take probabilities from 0 to 0.99, and a BERT model refuses them naming the key") {
  ConfigBuilder b;
  CHECK_THROWS_WITH(b.set("model.source_word_dropout", 1.0, "test"),
                    Catch::Contains("model.source_word_dropout"));
  CHECK_THROWS_WITH(b.set("model.target_word_dropout", -0.1, "test"),
                    Catch::Contains("model.target_word_dropout"));
  ConfigBuilder ok;
  ok.set("model.source_word_dropout", 0.1, "test");
  ok.set("model.target_word_dropout", 0.2, "test");
  auto cfg = ok.build();
  CHECK(cfg.model.source_word_dropout == Approx(0.1));
  CHECK(cfg.model.target_word_dropout == Approx(0.2));
  ConfigBuilder bert;
  bert.set("model.type", "bert", "test");
  bert.set("model.target_word_dropout", 0.1, "test");
  CHECK_THROWS_WITH(bert.build(), Catch::Contains("model.target_word_dropout"));
}

// The vocabulary-size checks (models/vocabulary_check.h) that every sequence-to-sequence model makes.
#include <catch2/catch.hpp>

#include <string>

#include "core/error.h"
#include "models/factory.h"
#include "models/tiny_config.h"
#include "models/vocabulary_check.h"

namespace parla_test_vocabulary_check {

using parla::ConfigError;
using parla::models::check_vocabulary_sizes;

TEST_CASE("vocabularies without room for the four special ids are a ConfigError saying so") {
  parla::ModelConfig cfg;
  REQUIRE_NOTHROW(check_vocabulary_sizes(cfg, 4, 4));
  REQUIRE_THROWS_MATCHES(check_vocabulary_sizes(cfg, 3, 9), ConfigError,
                         Catch::Message("vocabulary sizes 3/9 are too small (pad, unk, bos, eos need 4 ids)"));
  REQUIRE_THROWS_AS(check_vocabulary_sizes(cfg, 9, 2), ConfigError);
}

TEST_CASE("shared embeddings over vocabularies of different sizes are a ConfigError naming the key") {
  parla::ModelConfig cfg;
  REQUIRE_NOTHROW(check_vocabulary_sizes(cfg, 10, 12));
  cfg.share_embeddings = true;
  REQUIRE_NOTHROW(check_vocabulary_sizes(cfg, 12, 12));
  REQUIRE_THROWS_MATCHES(check_vocabulary_sizes(cfg, 10, 12), ConfigError,
                         Catch::Message("key 'model.share_embeddings': needs a joint vocabulary, but the source has 10 "
                                        "and the target 12 entries"));
}

TEST_CASE("the transformer and the rnn model refuse the same vocabularies with the same message") {
  for (auto cfg : {parla::testing::tiny_transformer(), parla::testing::tiny_rnn()}) {
    INFO("model.type " << parla::config::name_of(cfg.type));
    REQUIRE_THROWS_WITH(parla::models::build_seq2seq(cfg, 3, 9),
                        "vocabulary sizes 3/9 are too small (pad, unk, bos, eos need 4 ids)");
    cfg.share_embeddings = true;
    REQUIRE_THROWS_WITH(parla::models::build_seq2seq(cfg, 10, 12), Catch::Contains("model.share_embeddings"));
  }
}

}  // namespace parla_test_vocabulary_check

#include <catch2/catch.hpp>

#include "core/error.h"
#include "support/temp_dir.h"
#include "text/sentencepiece_training.h"
#include "text/sentencepiece_vocab.h"

using parla::VocabConfig;
using parla::text::SentencePieceVocab;
using parla::text::train_sentencepiece;

namespace {
// A small corpus with some repetition, so that subwords exist, and a few non-ASCII characters.
std::vector<std::string> corpus() {
  const char* words[] = {"the",      "session", "parliament", "resumed", "president", "commission", "member",
                         "states",   "debate",  "vote",       "agenda",  "report",    "council",    "european",
                         "citizens", "rights",  "caf\xC3\xA9", "na\xC3\xAFve", "\xC3\xBC" "ber", "stra\xC3\x9F" "e"};
  std::vector<std::string> lines;
  uint32_t x = 12345;
  for (int i = 0; i < 400; ++i) {
    std::string line;
    int n = 4 + i % 9;
    for (int k = 0; k < n; ++k) {
      x = x * 1664525u + 1013904223u;
      line += (k ? " " : "") + std::string(words[(x >> 16) % 20]);
    }
    lines.push_back(line + (i % 3 ? "." : " \xE2\x80\xA6"));  // some lines end in an ellipsis
  }
  return lines;
}

VocabConfig small_config() {
  VocabConfig c;
  c.vocab_size = 400;
  c.character_coverage = 1.0;
  return c;
}

const SentencePieceVocab& trained() {
  static const SentencePieceVocab v =
      SentencePieceVocab::from_serialized(train_sentencepiece(corpus(), small_config(), 2, 1).model_proto);
  return v;
}
}  // namespace

TEST_CASE("special ids are fixed: pad 0, unk 1, bos 2, eos 3") {
  const auto& v = trained();
  CHECK(v.piece_to_id("<pad>") == 0);
  CHECK(v.piece_to_id("<unk>") == 1);
  CHECK(v.piece_to_id("<s>") == 2);
  CHECK(v.piece_to_id("</s>") == 3);
  CHECK(v.id_to_piece(3) == "</s>");
  CHECK(v.size() <= 400);
}

TEST_CASE("decode(encode(line)) gives the cleaned line back, including characters NFKC would rewrite") {
  const auto& v = trained();
  for (const auto& line : corpus()) REQUIRE(v.decode(v.encode(line)) == line);
  // Never seen in training: byte fallback keeps them; "…" and "²" survive the identity normalisation.
  for (std::string line : {"x\xC2\xB2 + y\xC2\xB2 \xE2\x80\xA6", "\xE6\xBC\xA2\xE5\xAD\x97 (kanji)", "A-Z 0-9 {}[]"}) {
    auto ids = v.encode(line);
    for (int id : ids) CHECK(id != parla::text::kUnkId);
    CHECK(v.decode(ids) == line);
  }
}

TEST_CASE("SentencePiece's nmt_nfkc rule would rewrite the ellipsis, which is why identity is the default") {
  VocabConfig c = small_config();
  c.normalization_rule = "nmt_nfkc";
  auto v = SentencePieceVocab::from_serialized(train_sentencepiece(corpus(), c, 2, 1).model_proto);
  CHECK(v.decode(v.encode("wait \xE2\x80\xA6")) == "wait ...");
}

TEST_CASE("decoding skips pad, bos and eos and rejects ids outside the vocabulary") {
  const auto& v = trained();
  auto ids = v.encode("the session resumed");
  std::vector<int> framed = {2};
  framed.insert(framed.end(), ids.begin(), ids.end());
  framed.push_back(3);
  framed.push_back(0);
  CHECK(v.decode(framed) == "the session resumed");
  CHECK_THROWS_AS(v.decode({v.size()}), parla::DataError);
  CHECK_THROWS_AS(v.decode({-1}), parla::DataError);
}

TEST_CASE("a model survives serialization and loading from a file") {
  const auto& v = trained();
  auto copy = SentencePieceVocab::from_serialized(v.serialized());
  parla::testing::TempDir dir("spm");
  auto path = dir.write("m.model", v.serialized());
  auto loaded = SentencePieceVocab::load(path);
  for (const auto& line : {"the european parliament", "stra\xC3\x9F" "e"}) {
    CHECK(copy.encode(line) == v.encode(line));
    CHECK(loaded.encode(line) == v.encode(line));
  }
  CHECK_THROWS_AS(SentencePieceVocab::load(dir.file("missing.model")), parla::DataError);
  CHECK_THROWS_AS(SentencePieceVocab::load(dir.write("bad.model", "not a model")), parla::DataError);
  CHECK_THROWS_AS(SentencePieceVocab::from_serialized("garbage"), parla::DataError);
}

TEST_CASE("a vocabulary size the corpus cannot support shrinks instead of failing, for unigram and bpe") {
  std::vector<std::string> tiny = {"a small corpus", "with few words", "a few words only"};
  for (std::string type : {"unigram", "bpe"}) {
    INFO(type);
    VocabConfig c;
    c.model_type = type;
    c.vocab_size = 8000;
    auto r = train_sentencepiece(tiny, c, 1, 1);
    CHECK(r.vocab_size < 8000);
    auto v = SentencePieceVocab::from_serialized(r.model_proto);
    CHECK(v.decode(v.encode("a small corpus")) == "a small corpus");
  }
}

TEST_CASE("user-defined symbols are never split, and bpe models round-trip too") {
  VocabConfig c = small_config();
  c.model_type = "bpe";
  c.user_defined_symbols = {"<sep>", "@@TAG@@"};
  auto v = SentencePieceVocab::from_serialized(train_sentencepiece(corpus(), c, 2, 1).model_proto);
  int sep = v.piece_to_id("<sep>");
  CHECK(sep > 3);
  auto ids = v.encode("the vote <sep> the debate");
  CHECK(std::count(ids.begin(), ids.end(), sep) == 1);
  for (const auto& line : corpus()) REQUIRE(v.decode(v.encode(line)) == line);
}

TEST_CASE("training with no sentences is a data error") {
  CHECK_THROWS_AS(train_sentencepiece({}, VocabConfig{}, 1, 1), parla::DataError);
}

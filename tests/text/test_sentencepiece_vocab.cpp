#include <catch2/catch.hpp>

#include <algorithm>

#include "support/choice.h"
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
    for (int id : ids) CHECK(id != parla::kUnkId);
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
    c.model_type = parla::testing::choice<parla::SubwordModel>(type);
    c.vocab_size = 8000;
    auto r = train_sentencepiece(tiny, c, 1, 1);
    CHECK(r.vocab_size < 8000);
    auto v = SentencePieceVocab::from_serialized(r.model_proto);
    CHECK(v.decode(v.encode("a small corpus")) == "a small corpus");
  }
}

TEST_CASE("user-defined symbols are never split, and bpe models round-trip too") {
  VocabConfig c = small_config();
  c.model_type = parla::SubwordModel::kBpe;
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

// Sentences over a Zipf-distributed vocabulary of 3,000 invented words built from syllables, so that a
// 500-piece vocabulary has to choose among many shared subwords (as on real text).
std::vector<std::string> zipf_corpus(int lines, uint32_t seed) {
  const char* syllables[] = {"ka", "to", "ri", "men", "sa", "lo", "ver", "di", "an", "tu", "pe", "shi",
                             "mo", "ra", "ne", "gol", "bi", "fa", "ze", "chu", "ol", "ig", "ust", "ny"};
  std::vector<std::string> vocab;
  uint32_t x = 99;
  auto next = [&x] { return x = x * 1664525u + 1013904223u; };
  for (int w = 0; w < 3000; ++w) {
    std::string word;
    int n = 1 + next() % 4;
    for (int k = 0; k < n; ++k) word += syllables[(next() >> 8) % 24];
    vocab.push_back(word);
  }
  std::vector<double> cdf;
  double z = 0;
  for (int r = 1; r <= 3000; ++r) cdf.push_back(z += 1.0 / r);
  x = seed;
  std::vector<std::string> out;
  for (int i = 0; i < lines; ++i) {
    std::string line;
    int n = 5 + next() % 15;
    for (int k = 0; k < n; ++k) {
      double u = (next() >> 8) / double(1 << 24) * z;
      line += (k ? " " : "") + vocab[std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin()];
    }
    out.push_back(line);
  }
  return out;
}

TEST_CASE("bpe from word counts is the bpe of the whole sentences, and unigram keeps whole sentences") {
  // Extra spaces and a tab between words must count like single spaces, as SentencePiece's own splitting does.
  auto lines = zipf_corpus(4000, 1);
  for (size_t i = 0; i < lines.size(); i += 7) lines[i] = "  " + lines[i] + "\t";
  const auto held_out = zipf_corpus(500, 2);
  auto pieces = [](const SentencePieceVocab& v) {
    std::vector<std::pair<std::string, float>> p;
    for (int i = 0; i < v.size(); ++i) p.emplace_back(v.id_to_piece(i), v.score(i));
    return p;
  };
  VocabConfig c = small_config();
  c.vocab_size = 500;
  c.model_type = parla::SubwordModel::kBpe;
  auto a = SentencePieceVocab::from_serialized(train_sentencepiece(lines, c, 2, 1).model_proto);
  auto b = SentencePieceVocab::from_serialized(train_sentencepiece(lines, c, 2, 1, false).model_proto);
  CHECK(pieces(a) == pieces(b));
  for (const auto& line : held_out) REQUIRE(a.decode(a.encode(line)) == line);
  // Unigram ignores the switch: the same sentences give the same model either way.
  c.model_type = parla::SubwordModel::kUnigram;
  auto u1 = SentencePieceVocab::from_serialized(train_sentencepiece(lines, c, 2, 1).model_proto);
  auto u2 = SentencePieceVocab::from_serialized(train_sentencepiece(lines, c, 2, 1, false).model_proto);
  CHECK(pieces(u1) == pieces(u2));
}

namespace {
// An imported vocabulary's table over the trained model: specials first, then the model's pieces in reverse
// order (so that table ids and the model's own differ everywhere), two target-language tokens, and a piece the
// model never produces. `ordinary_two`: id 2 holds the first piece of corpus line 0 (a model that starts from pad
// has no bos, and id 2 is an ordinary piece).
std::vector<std::string> reversed_table(const SentencePieceVocab& v, bool ordinary_two) {
  std::vector<std::string> t = {"<pad>", "<unk>", "<s>", "</s>", ">>fra<<", ">>deu<<", "NEVER-PRODUCED"};
  for (int id = v.size() - 1; id >= 4; --id) t.push_back(v.id_to_piece(id));
  if (ordinary_two) std::swap(t[2], *std::find(t.begin(), t.end(), v.id_to_piece(v.encode(corpus()[0]).front())));
  return t;
}
}  // namespace

TEST_CASE("a piece table renumbers the model's pieces: encode and decode go through it, language tokens included") {
  const auto& v = trained();
  const auto table = reversed_table(v, false);
  auto t = SentencePieceVocab::from_serialized(v.serialized(), table);
  CHECK(t.size() == static_cast<int>(table.size()));
  CHECK(t.pieces() == table);
  CHECK(v.pieces().empty());
  const std::string line = "the council debate report caf\xC3\xA9";
  const auto own = v.encode(line), renumbered = t.encode(line);
  REQUIRE(own.size() == renumbered.size());
  for (size_t i = 0; i < own.size(); ++i) {
    CHECK(t.id_to_piece(renumbered[i]) == v.id_to_piece(own[i]));  // the same pieces, other ids
    CHECK(renumbered[i] == t.piece_to_id(v.id_to_piece(own[i])));
  }
  CHECK(t.decode(renumbered) == v.decode(own));
  // A leading language token is one id; anywhere else it is text.
  auto fra = t.encode(">>fra<< the vote");
  REQUIRE(fra.size() == t.encode("the vote").size() + 1);
  CHECK(fra[0] == 4);
  CHECK(std::equal(fra.begin() + 1, fra.end(), t.encode("the vote").begin()));
  CHECK(t.encode("the >>fra<< vote") != t.encode("the vote"));
  CHECK(t.encode(">>xyz<< the vote")[0] != 4);  // not in the table: ordinary text
  // pad, unk, bos and eos decode to nothing.
  auto with_specials = renumbered;
  with_specials.insert(with_specials.begin(), {0, 2, 1});
  with_specials.push_back(3);
  CHECK(t.decode(with_specials) == v.decode(own));
}

namespace {
// The text of ids by the naive rule that transformers' MarianTokenizer and OPUS-MT's spm_decode step follow for
// plain pieces: the pieces of the non-special ids joined, word boundaries (U+2581) made spaces, the ends trimmed.
std::string joined_pieces_text(const SentencePieceVocab& t, const std::vector<int>& ids) {
  std::string s;
  for (int id : ids)
    if (id > 3) s += t.id_to_piece(id);
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 3, "\xE2\x96\x81") == 0) {
      out += ' ';
      i += 3;
    } else {
      out += s[i++];
    }
  }
  const size_t a = out.find_first_not_of(' '), b = out.find_last_not_of(' ');
  return a == std::string::npos ? "" : out.substr(a, b - a + 1);
}
}  // namespace

TEST_CASE("a piece table's entries that the model lacks decode by their surface, as SentencePiece's DecodePieces") {
  // The real OPUS-MT layout: one joint vocabulary over two SentencePiece models, so the target model lacks the
  // source side's pieces. The model of this test lacks ">>fra<<", "NEVER-PRODUCED" and two word-initial pieces.
  const auto& v = trained();
  auto table = reversed_table(v, false);
  table.push_back("\xE2\x96\x81Zebrafisch");
  table.push_back("\xE2\x96\x81Qx");
  const int zebra = static_cast<int>(table.size()) - 2, qx = zebra + 1;
  REQUIRE(v.piece_to_id(table[static_cast<size_t>(zebra)]) == parla::kUnkId);  // not the model's
  auto t = SentencePieceVocab::from_serialized(v.serialized(), table);
  const auto line = t.encode("the council debate report");
  REQUIRE(line.size() >= 3);
  const std::vector<std::vector<int>> cases = {
      {zebra},                                      // alone
      {zebra, line[0], line[1]},                    // first, then the model's pieces
      {line[0], zebra, line[1], qx},                // inside and last
      {4, line[0], 6, line[1], line[2]},            // a language token and a piece without a word boundary
      {0, zebra, 1, 2, qx, 3},                      // with the specials, which print nothing
      {line[0], zebra, zebra, qx, line[2], 5, 3},   // repeated
  };
  for (const auto& ids : cases) {
    std::string shown;
    for (int id : ids) shown += std::to_string(id) + " ";
    INFO(shown);
    CHECK(t.decode(ids) == joined_pieces_text(t, ids));
  }
  // Encoding: a span the model cannot segment is its surface text, which is a table entry where the table has it
  // (as Marian's vocab.yml and MarianTokenizer look it up), so such a line comes back whole; else unk. OPUS-MT's
  // models have no byte fallback, so neither has this one.
  auto config = small_config();
  config.byte_fallback = false;
  const auto no_bytes = SentencePieceVocab::from_serialized(train_sentencepiece(corpus(), config, 2, 1).model_proto);
  const auto plain_table = reversed_table(no_bytes, false);
  const std::string cyrillic = "the \xD0\x96\xD0\xB4 vote";
  const auto without = SentencePieceVocab::from_serialized(no_bytes.serialized(), plain_table).encode(cyrillic);
  CHECK(std::count(without.begin(), without.end(), parla::kUnkId) == 1);
  auto with_table = plain_table;
  with_table.push_back("\xD0\x96\xD0\xB4");
  with_table.push_back("\xE2\x96\x81\xD0\x96\xD0\xB4");
  auto w = SentencePieceVocab::from_serialized(no_bytes.serialized(), with_table);
  const auto with = w.encode(cyrillic);
  CHECK(std::count(with.begin(), with.end(), parla::kUnkId) == 0);
  CHECK(std::count_if(with.begin(), with.end(), [&](int id) { return id >= static_cast<int>(plain_table.size()); }) == 1);
  CHECK(w.decode(with) == cyrillic);
  // Specials are never produced, even by a surface that spells one.
  for (int id : w.encode("a </s> <pad> <s> b")) CHECK((id == parla::kUnkId || id > 3));
  // Nothing is lost, whatever comes around the piece.
  CHECK(t.decode({zebra}) == "Zebrafisch");
  CHECK(t.decode({0, qx, zebra, 3}) == "Qx Zebrafisch");
  const std::string after = t.decode({line[0], line[1], zebra});
  CHECK(after.size() > 11);
  CHECK(after.compare(after.size() - 11, 11, " Zebrafisch") == 0);
}

TEST_CASE("in a piece table id 2 is bos unless the model produces its piece, and pieces the table lacks are unk") {
  const auto& v = trained();
  auto table = reversed_table(v, true);  // id 2 is an ordinary piece
  const std::string moved = table[2];
  auto t = SentencePieceVocab::from_serialized(v.serialized(), table);
  // Corpus line 0 starts with the moved piece: it encodes as id 2, and decodes back whole.
  const auto own = v.encode(corpus()[0]);
  const auto ids = t.encode(corpus()[0]);
  REQUIRE(ids.size() == own.size());
  CHECK(ids.front() == 2);
  CHECK(v.id_to_piece(own.front()) == moved);
  CHECK(t.decode(ids) == v.decode(own));
  // A table without the line's last piece: it encodes as unk, the others as before.
  const std::string dropped = v.id_to_piece(own.back());
  table.erase(std::find(table.begin(), table.end(), dropped));
  auto smaller = SentencePieceVocab::from_serialized(v.serialized(), table);
  const auto fewer = smaller.encode(corpus()[0]);
  REQUIRE(fewer.size() == own.size());
  CHECK(fewer.back() == 1);
  CHECK(std::count(fewer.begin(), fewer.end(), 1) == std::count(own.begin(), own.end(), own.back()));
  CHECK_THROWS_AS(SentencePieceVocab::from_serialized(v.serialized(), {"<pad>", "<unk>", "<s>"}), parla::DataError);
  CHECK_THROWS_WITH(SentencePieceVocab::from_serialized(v.serialized(), {"<pad>", "<unk>", "<s>", "</s>", "x", "x"}),
                    Catch::Contains("twice"));
}

TEST_CASE("control pieces of a table (M2M-100's and NLLB's language codes) are never produced from text and never "
          "printed") {
  const auto& v = trained();
  auto table = reversed_table(v, false);
  table.push_back("deu_Latn");
  table.push_back("__de__");
  const int deu = static_cast<int>(table.size()) - 2, de = deu + 1;
  const auto plain = SentencePieceVocab::from_serialized(v.serialized(), table);
  const auto t = SentencePieceVocab::from_serialized(v.serialized(), table, {"deu_Latn", "__de__", "not-in-table"});
  const auto line = t.encode("the vote");
  std::vector<int> with = {deu};
  with.insert(with.end(), line.begin(), line.end());
  with.push_back(de);
  CHECK(t.decode(with) == t.decode(line));
  CHECK(plain.decode(with) == joined_pieces_text(plain, with));  // as ordinary pieces they are printed
  // Text that spells a control piece is never that id (it is segmented, or unknown).
  for (int id : t.encode("deu_Latn __de__")) CHECK((id != deu && id != de));
  CHECK(t.piece_to_id("deu_Latn") == deu);  // the translator places it by name
}

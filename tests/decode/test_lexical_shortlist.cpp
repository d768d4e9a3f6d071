// Lexical shortlists (decode/lexical_shortlist.h): the co-occurrence ranking against a brute-force count, a
// sentence's vocabulary against its definition, the vocabulary-map file (round trip, CTranslate2's n-gram and
// always-allowed rules, errors naming file and line), and build_shortlist on text files.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "core/error.h"
#include "decode/lexical_shortlist.h"
#include "models/checkpoint.h"
#include "support/temp_dir.h"
#include "support/tiny_checkpoint.h"

using namespace parla;
using namespace parla::decode;
using parla::testing::TempDir;

namespace {

using Corpus = std::vector<std::pair<std::vector<int>, std::vector<int>>>;

Corpus random_corpus(unsigned seed, int pairs) {
  std::mt19937 rng(seed);
  Corpus out;
  for (int i = 0; i < pairs; ++i) {
    std::vector<int> s(1 + rng() % 8), t(1 + rng() % 8);
    for (auto& x : s) x = 4 + static_cast<int>(rng() % 15);
    // Targets: a noisy "translation" (source id + 100) plus random words, so that rankings are not all ties.
    for (size_t j = 0; j < t.size(); ++j) t[j] = j < s.size() && rng() % 4 ? s[j] + 100 : 104 + static_cast<int>(rng() % 20);
    out.emplace_back(s, t);
  }
  return out;
}

// The ranking by its definition: counts of sentence pairs, Dice, ties by joint count then id, the always-allowed
// pieces skipped.
LexicalShortlist::Builder builder_of(const Corpus& c) {
  LexicalShortlist::Builder b;
  for (const auto& [s, t] : c) b.add(s, t);
  return b;
}

struct Brute {
  std::vector<int> always;
  std::map<int, std::vector<int>> rules;
};

Brute brute_force(const Corpus& c, const ShortlistOptions& o) {
  std::map<int, int> cs, ct;
  std::map<std::pair<int, int>, int> joint;
  for (const auto& [s, t] : c) {
    std::set<int> us(s.begin(), s.end()), ut(t.begin(), t.end());
    for (int x : us) ++cs[x];
    for (int y : ut) ++ct[y];
    for (int x : us)
      for (int y : ut) ++joint[{x, y}];
  }
  Brute b;
  std::vector<std::pair<int, int>> freq;
  for (auto [y, n] : ct) freq.push_back({-n, y});
  std::sort(freq.begin(), freq.end());
  for (int i = 0; i < o.frequent && i < static_cast<int>(freq.size()); ++i) b.always.push_back(freq[i].second);
  std::sort(b.always.begin(), b.always.end());
  for (auto [x, n] : cs) {
    std::vector<std::tuple<double, int, int>> ranked;  // (-dice, -joint, id)
    for (auto [y, m] : ct) {
      auto it = joint.find({x, y});
      if (it == joint.end() || std::binary_search(b.always.begin(), b.always.end(), y)) continue;
      ranked.push_back({-2.0 * it->second / (n + m), -it->second, y});
    }
    std::sort(ranked.begin(), ranked.end());
    std::vector<int> kept;
    for (int i = 0; i < o.best && i < static_cast<int>(ranked.size()); ++i) kept.push_back(std::get<2>(ranked[i]));
    std::sort(kept.begin(), kept.end());
    if (!kept.empty()) b.rules[x] = kept;
  }
  return b;
}

struct Vocabs {
  TempDir dir{"shortlist-vocab"};
  text::SentencePieceVocab src, tgt;
  Vocabs()
      : src(init_src()),
        tgt(models::target_vocab(models::read_meta(dir.file("model.pt")), dir.file("model.pt"))) {}
  text::SentencePieceVocab init_src() {
    parla::testing::write_tiny_checkpoint(dir.file("model.pt"), 3);
    return models::source_vocab(models::read_meta(dir.file("model.pt")), dir.file("model.pt"));
  }
};

Vocabs& vocabs() {
  static Vocabs v;
  return v;
}

}  // namespace

TEST_CASE("shortlist: the Dice ranking and the always-allowed set are those of a brute-force count", "[shortlist]") {
  for (unsigned seed : {1u, 2u, 3u}) {
    const auto corpus = random_corpus(seed, 200);
    for (auto [best, frequent] : {std::pair{3, 5}, {10, 0}, {1, 30}}) {
      ShortlistOptions o;
      o.best = best;
      o.frequent = frequent;
      const auto got = builder_of(corpus).build(o);
      const auto want = brute_force(corpus, o);
      CHECK(got.always() == want.always);
      std::map<int, std::vector<int>> rules;
      for (const auto& [key, targets] : got.rules(1)) {
        REQUIRE(key.size() == 1);
        rules[key[0]] = targets;
      }
      CHECK(rules == want.rules);
    }
  }
}

TEST_CASE("shortlist: a sentence's vocabulary is the union of its pieces' rules, the always set, EOS and UNK",
          "[shortlist]") {
  const auto corpus = random_corpus(4, 100);
  ShortlistOptions o;
  o.best = 4;
  o.frequent = 3;
  const auto sl = builder_of(corpus).build(o);
  std::vector<int64_t> sentence = {5, 9, 5, 77};  // 77 never seen: no rule
  std::set<int64_t> want(sl.always().begin(), sl.always().end());
  want.insert(kEosId);
  want.insert(kUnkId);
  for (int64_t x : sentence) {
    auto it = sl.rules(1).find({static_cast<int>(x)});
    if (it != sl.rules(1).end()) want.insert(it->second.begin(), it->second.end());
  }
  CHECK(sl.candidates(sentence.data(), 4) == std::vector<int64_t>(want.begin(), want.end()));
  // An empty sentence still gets the always set, EOS and UNK.
  CHECK(sl.candidates(nullptr, 0).size() == sl.always().size() + 2);
}

TEST_CASE("shortlist files: written and read back as the same rules, n-gram and always-allowed lines honoured",
          "[shortlist]") {
  auto& v = vocabs();
  TempDir dir("shortlist-file");
  // Ids of real pieces: those of two words.
  const auto the = v.src.encode("the"), house = v.src.encode("house"), dog = v.tgt.encode("dog");
  REQUIRE(the.size() == 1);
  REQUIRE(house.size() == 1);
  LexicalShortlist::Builder b;
  for (int i = 0; i < 5; ++i) b.add(v.src.encode("the house is small"), v.tgt.encode("a dog runs fast"));
  b.add(v.src.encode("we see"), v.tgt.encode("green tree"));
  ShortlistOptions o;
  o.best = 3;
  o.frequent = 2;
  const auto sl = b.build(o);
  const auto path = dir.file("sl.txt");
  sl.save(path, v.src, v.tgt);
  const auto back = LexicalShortlist::load(path, v.src, v.tgt);
  CHECK(back.always() == sl.always());
  CHECK(back.rules(1) == sl.rules(1));

  // A CTranslate2 map: an always line, a unigram, a bigram that matches only as a bigram, CRLF line ends.
  const std::string p_the = v.src.id_to_piece(the[0]), p_house = v.src.id_to_piece(house[0]);
  const std::string p_dog = v.tgt.id_to_piece(dog[0]);
  const std::string p_tree = v.tgt.id_to_piece(v.tgt.encode("tree")[0]);
  const std::string p_see = v.tgt.id_to_piece(v.tgt.encode("see")[0]);
  dir.write("ct2.txt", "\t" + p_see + "\r\n" + p_the + "\t" + p_dog + "\n" + p_the + " " + p_house + "\t" + p_tree + "\n");
  const auto ct2 = LexicalShortlist::load(dir.file("ct2.txt"), v.src, v.tgt);
  CHECK(ct2.max_ngram() == 2);
  auto ids = [](std::vector<int64_t> x) {
    x.push_back(kEosId);
    x.push_back(kUnkId);
    std::sort(x.begin(), x.end());
    return x;
  };
  const int64_t see = v.tgt.encode("see")[0], tree = v.tgt.encode("tree")[0];
  std::vector<int64_t> th = {the[0], house[0]}, ht = {house[0], the[0]};
  CHECK(ct2.candidates(th.data(), 2) == ids({see, dog[0], tree}));
  CHECK(ct2.candidates(ht.data(), 2) == ids({see, dog[0]}));
  CHECK(ct2.candidates(ht.data(), 1) == ids({see}));
}

TEST_CASE("shortlist files: a line without a tab or a piece the model lacks is refused naming the file and line",
          "[shortlist]") {
  auto& v = vocabs();
  TempDir dir("shortlist-bad");
  const std::string p_dog = v.tgt.id_to_piece(v.tgt.encode("dog")[0]);
  dir.write("notab.txt", "\t" + p_dog + "\n" + p_dog + " " + p_dog + "\n");
  CHECK_THROWS_WITH(LexicalShortlist::load(dir.file("notab.txt"), v.src, v.tgt),
                    Catch::Contains("notab.txt:2") && Catch::Contains("no tab"));
  dir.write("unknown.txt", "\t" + p_dog + "\n\n" + p_dog + "\tnot-a-piece-xyz\n");
  CHECK_THROWS_WITH(LexicalShortlist::load(dir.file("unknown.txt"), v.src, v.tgt),
                    Catch::Contains("unknown.txt:3") && Catch::Contains("not-a-piece-xyz"));
  CHECK_THROWS_AS(LexicalShortlist::load(dir.file("missing.txt"), v.src, v.tgt), DataError);
}

TEST_CASE("build_shortlist reads two text files line by line and refuses sides of different lengths", "[shortlist]") {
  auto& v = vocabs();
  TempDir dir("shortlist-text");
  const auto src = dir.write("src.txt", "the house is small\nwe see\nthe dog runs\n");
  const auto tgt = dir.write("tgt.txt", "a dog runs fast\ngreen tree\nsmall tree\n");
  ShortlistOptions o;
  o.best = 2;
  o.frequent = 1;
  const auto got = build_shortlist(src, tgt, v.src, v.tgt, o);
  LexicalShortlist::Builder b;
  b.add(v.src.encode("the house is small"), v.tgt.encode("a dog runs fast"));
  b.add(v.src.encode("we see"), v.tgt.encode("green tree"));
  b.add(v.src.encode("the dog runs"), v.tgt.encode("small tree"));
  const auto want = b.build(o);
  CHECK(got.always() == want.always());
  CHECK(got.rules(1) == want.rules(1));
  o.max_sentences = 1;
  CHECK(build_shortlist(src, tgt, v.src, v.tgt, o).rules(1).size() < want.rules(1).size());
  const auto short_tgt = dir.write("short.txt", "a dog runs fast\n");
  o.max_sentences = 0;
  CHECK_THROWS_WITH(build_shortlist(src, short_tgt, v.src, v.tgt, o),
                    Catch::Contains("short.txt ends at line 1"));
}

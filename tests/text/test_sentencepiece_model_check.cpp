#include <catch2/catch.hpp>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/temp_dir.h"
#include "text/sentencepiece_library.h"
#include "text/sentencepiece_model_check.h"
#include "text/sentencepiece_training.h"
#include "text/sentencepiece_vocab.h"

using parla::text::SentencePieceVocab;

// A named namespace, test cases included: the unity build joins test files, whose anonymous helpers would clash.
namespace sentencepiece_model_check_test {

// --- The protobuf wire format, written again here (independently of the checker) to edit models. ---
struct WireField {
  uint32_t key;
  std::string value;  // the raw bytes after the key (varint, fixed or length-delimited payload)
};
uint64_t read_varint(const std::string& b, size_t& i) {
  uint64_t v = 0;
  for (int s = 0;; s += 7) {
    const auto c = static_cast<unsigned char>(b.at(i++));
    v |= static_cast<uint64_t>(c & 0x7f) << s;
    if (c < 0x80) return v;
  }
}
std::string varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7f) | 0x80);
  return out + static_cast<char>(v);
}
std::vector<WireField> split(const std::string& b) {
  std::vector<WireField> out;
  for (size_t i = 0; i < b.size();) {
    const auto key = static_cast<uint32_t>(read_varint(b, i));
    const size_t start = i;
    switch (key & 7) {
      case 0: read_varint(b, i); out.push_back({key, b.substr(start, i - start)}); break;
      case 1: i += 8; out.push_back({key, b.substr(start, 8)}); break;
      case 5: i += 4; out.push_back({key, b.substr(start, 4)}); break;
      case 2: {
        const size_t n = read_varint(b, i);
        out.push_back({key, b.substr(i, n)});
        i += n;
        break;
      }
      default: FAIL("unexpected wire type");
    }
  }
  return out;
}
std::string join(const std::vector<WireField>& fields) {
  std::string out;
  for (const auto& f : fields) out += varint(f.key) + ((f.key & 7) == 2 ? varint(f.value.size()) : "") + f.value;
  return out;
}
constexpr uint32_t key(uint32_t number, uint32_t wire_type) { return number << 3 | wire_type; }

std::string charsmap_of(const std::string& model) {
  for (const auto& f : split(model))
    if (f.key == key(3, 2))
      for (const auto& g : split(f.value))
        if (g.key == key(2, 2)) return g.value;
  return "";
}
std::string with_charsmap(const std::string& model, const std::string& charsmap) {
  auto fields = split(model);
  for (auto& f : fields)
    if (f.key == key(3, 2)) {
      auto spec = split(f.value);
      for (auto& g : spec)
        if (g.key == key(2, 2)) g.value = charsmap;
      f.value = join(spec);
    }
  return join(fields);
}
// The model with its first ordinary piece (no type field) replaced by `piece`.
std::string with_piece(const std::string& model, const std::string& piece) {
  auto fields = split(model);
  for (auto& f : fields) {
    if (f.key != key(1, 2)) continue;
    auto p = split(f.value);
    bool ordinary = true;
    for (const auto& g : p) ordinary = ordinary && g.key >> 3 != 3;
    if (!ordinary) continue;
    for (auto& g : p)
      if (g.key == key(1, 2)) g.value = piece;
    f.value = join(p);
    break;
  }
  return join(fields);
}

// --- Darts-clone's common prefix search, with every read checked: what SentencePiece's normalizer does to the
// charsmap for one key. False when a read would leave the trie or the strings. ---
uint32_t le32(const std::string& b, size_t at) {
  uint32_t v = 0;
  std::memcpy(&v, b.data() + at, 4);  // the test machines are little-endian
  return v;
}
bool walk_stays_inside(const std::string& charsmap, const std::string& input) {
  const size_t trie = le32(charsmap, 0), n = trie / 4, strings = charsmap.size() - 4 - trie;
  auto unit = [&](uint64_t i, uint32_t& u) {
    if (i >= n) return false;
    u = le32(charsmap, 4 + 4 * i);
    return true;
  };
  auto offset = [](uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
  uint32_t u = 0;
  if (!unit(0, u)) return false;
  uint64_t pos = offset(u);
  for (unsigned char c : input) {
    pos ^= c;
    if (!unit(pos, u)) return false;
    if ((u & ((1u << 31) | 0xffu)) != c) return true;
    pos ^= offset(u);
    if (u >> 8 & 1) {
      uint32_t leaf = 0;
      if (!unit(pos, leaf)) return false;
      const size_t v = leaf & ((1u << 31) - 1);
      if (v >= strings || !std::memchr(charsmap.data() + 4 + trie + v, '\0', strings - v)) return false;
    }
  }
  return true;
}

// Keys a normalizer meets: every single byte, every character up to U+FFFF and some beyond, then each followed
// by every byte (the second step of a walk) for the ASCII and Latin-1 ones.
const std::vector<std::string>& probe_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    for (int b = 0; b < 256; ++b) k.push_back(std::string(1, static_cast<char>(b)));
    auto utf8 = [](uint32_t c) {
      std::string s;
      if (c < 0x80) return std::string(1, static_cast<char>(c));
      if (c < 0x800) return s + static_cast<char>(0xc0 | c >> 6) + static_cast<char>(0x80 | (c & 0x3f));
      if (c < 0x10000)
        return s + static_cast<char>(0xe0 | c >> 12) + static_cast<char>(0x80 | (c >> 6 & 0x3f)) +
               static_cast<char>(0x80 | (c & 0x3f));
      return s + static_cast<char>(0xf0 | c >> 18) + static_cast<char>(0x80 | (c >> 12 & 0x3f)) +
             static_cast<char>(0x80 | (c >> 6 & 0x3f)) + static_cast<char>(0x80 | (c & 0x3f));
    };
    for (uint32_t c = 0x80; c < 0x10000; ++c)
      if (c < 0xd800 || c >= 0xe000) k.push_back(utf8(c));
    for (uint32_t c = 0x1d400; c < 0x1d800; ++c) k.push_back(utf8(c));  // mathematical letters NFKC rewrites
    for (int a = 0x20; a < 0x100; ++a)
      for (int b = 0; b < 256; ++b) k.push_back(std::string{static_cast<char>(a), static_cast<char>(b)});
    return k;
  }();
  return keys;
}

std::vector<std::string> corpus() {
  std::vector<std::string> lines;
  const char* words[] = {"the", "caf\xC3\xA9", "\xEF\xBC\xA1\xEF\xBC\xA2", "\xEF\xAC\x81ne", "na\xC3\xAFve",
                         "Stra\xC3\x9F" "e", "\xE2\x91\xA0", "vote", "\xE3\x8D\xBB", "report"};
  uint32_t x = 7;
  for (int i = 0; i < 200; ++i) {
    std::string line;
    for (int k = 0; k < 6; ++k) {
      x = x * 1664525u + 1013904223u;
      line += (k ? " " : "") + std::string(words[(x >> 16) % 10]);
    }
    lines.push_back(line);
  }
  return lines;
}
std::string trained(const std::string& rule) {
  parla::VocabConfig c;
  c.vocab_size = 400;
  c.character_coverage = 1.0;
  c.normalization_rule = rule;
  return parla::text::train_sentencepiece(corpus(), c, 1, 1).model_proto;
}
const std::string& nfkc_model() {
  static const std::string m = trained("nmt_nfkc");
  return m;
}

// Ids of `line` from SentencePiece itself, without the check: what parla gave before it.
std::vector<int> raw_encode(const std::string& proto, const std::string& line) {
  const auto& lib = parla::text::detail::sentencepiece_library();
  char* error = nullptr;
  void* m = lib.load(proto.data(), proto.size(), 0, &error);
  REQUIRE(m != nullptr);
  int* ids = nullptr;
  size_t n = 0;
  REQUIRE(lib.encode(m, line.data(), line.size(), &ids, &n, &error) == 0);
  std::vector<int> out(ids, ids + n);
  lib.free(ids);
  lib.free_model(m);
  return out;
}

std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const parla::DataError& e) {
    return e.what();
  }
  return "";
}


TEST_CASE("models of every normalization rule pass the check and encode exactly as SentencePiece alone does") {
  parla::testing::TempDir dir("spm_check_valid");
  const std::string line =
      "The caf\xC3\xA9 \xEF\xBC\xA1\xEF\xBC\xA2 \xEF\xAC\x81ne \xE2\x91\xA0 \xE3\x8D\xBB Stra\xC3\x9F" "e";
  for (const char* rule : {"nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf", "identity"}) {
    INFO(rule);
    const std::string proto = std::string(rule) == "nmt_nfkc" ? nfkc_model() : trained(rule);
    CHECK((std::string(rule) == "identity") == charsmap_of(proto).empty());
    CHECK(parla::text::charsmap_problem(charsmap_of(proto)).empty());
    const auto from_file = SentencePieceVocab::load(dir.write(std::string(rule) + ".model", proto));
    const auto from_bytes = SentencePieceVocab::from_serialized(proto);
    CHECK(from_file.encode(line) == raw_encode(proto, line));
    CHECK(from_bytes.encode(line) == raw_encode(proto, line));
    CHECK(from_file.serialized() == proto);
  }
}

TEST_CASE("a sound charsmap's trie stays inside its array and strings for every probe key (the walk, checked)") {
  const std::string cm = charsmap_of(nfkc_model());
  REQUIRE(cm.size() > 4);
  for (const auto& k : probe_keys()) REQUIRE(walk_stays_inside(cm, k));
}

TEST_CASE("a charsmap trie of all 0xff bytes, or random bytes, is refused naming the file") {
  parla::testing::TempDir dir("spm_check_trie");
  std::string cm = charsmap_of(nfkc_model());
  const size_t trie = le32(cm, 0);
  std::string ff = cm, random = cm;
  std::fill(ff.begin() + 4, ff.begin() + 4 + static_cast<long>(trie), '\xff');
  std::mt19937 rng(59);
  for (size_t i = 4; i < 4 + trie; ++i) random[i] = static_cast<char>(rng());
  for (const auto& bad : {ff, random}) {
    const std::string path = dir.write("crafted.model", with_charsmap(nfkc_model(), bad));
    const std::string e = refusal([&] { SentencePieceVocab::load(path); });
    CHECK_THAT(e, Catch::Contains(path) && Catch::Contains("charsmap"));
    CHECK_THAT(refusal([&] { SentencePieceVocab::from_serialized(with_charsmap(nfkc_model(), bad)); }),
               Catch::Contains("charsmap"));
  }
  // A trie size past the blob, and a blob too short for one.
  std::string big = cm;
  big[3] = '\x7f';
  CHECK_THAT(refusal([&] { SentencePieceVocab::from_serialized(with_charsmap(nfkc_model(), big)); }),
             Catch::Contains("exceeds"));
  CHECK_FALSE(parla::text::charsmap_problem("\x01\x00\x00").empty());
}

// The property that matters: whatever few units are corrupted, a charsmap the check accepts is walked inside its
// bounds for every probe key; and one that a probe key walks out of bounds is refused.
TEST_CASE("sparsely corrupted charsmaps: accepted ones stay in bounds, out-of-bounds ones are refused") {
  const std::string model = nfkc_model(), cm = charsmap_of(model);
  const size_t trie = le32(cm, 0);
  std::mt19937 rng(6);
  int accepted = 0, refused = 0, caught_by_walk = 0;
  for (int round = 0; round < 12; ++round) {
    std::string bad = cm;
    const int edits = 1 << (round % 4);
    for (int e = 0; e < edits; ++e) {
      // Mostly in the trie's first blocks, where every walk passes; some in the strings.
      const size_t at = rng() % 4 == 0 ? 4 + trie + rng() % (cm.size() - 4 - trie)
                                       : 4 + rng() % std::min(trie, size_t{8192});
      bad[at] = static_cast<char>(rng());
    }
    const bool ok = parla::text::charsmap_problem(bad).empty();
    bool inside = true;
    for (const auto& k : probe_keys())
      if (!walk_stays_inside(bad, k)) {
        inside = false;
        break;
      }
    INFO("round " << round);
    if (!inside) CHECK_FALSE(ok);
    if (ok) {
      CHECK(inside);
      ++accepted;
      // And SentencePiece itself normalizes the probe without harm.
      std::string probe;
      for (size_t i = 256; i < probe_keys().size() && probe.size() < 40000; i += 3) probe += probe_keys()[i];
      raw_encode(with_charsmap(model, bad), probe);
    } else {
      ++refused;
    }
    caught_by_walk += inside ? 0 : 1;
  }
  CHECK(accepted > 0);
  CHECK(refused > 0);
  CHECK(caught_by_walk > 0);
}

TEST_CASE("a 1 MB piece is refused naming the file, and a piece at the cap loads and encodes") {
  parla::testing::TempDir dir("spm_check_piece");
  const std::string path = dir.write("long.model", with_piece(nfkc_model(), std::string(1 << 20, 'a')));
  const std::string e = refusal([&] { SentencePieceVocab::load(path); });
  CHECK_THAT(e, Catch::Contains(path) && Catch::Contains("1048576 bytes"));
  const std::string at_cap(parla::text::kMaxSentencePieceBytes, 'b');
  const auto v = SentencePieceVocab::from_serialized(with_piece(nfkc_model(), at_cap));
  CHECK(v.piece_to_id(at_cap) >= 4);
  CHECK_FALSE(refusal([&] { SentencePieceVocab::from_serialized(with_piece(nfkc_model(), at_cap + "b")); }).empty());
}

TEST_CASE("bytes that are not protobuf are refused before SentencePiece reads them") {
  for (const std::string& bad : {std::string("\x0a\xff\xff\xff\xff\x0f", 6), std::string("\x0b\x01", 2),
                                std::string("\x1a\x05\x12\x10", 4), std::string("\x00", 1)}) {
    CHECK_THROWS_AS(parla::text::check_sentencepiece_model(bad, "x"), parla::DataError);
  }
  // An unknown field of any wire type is skipped, as protobuf does.
  CHECK_NOTHROW(parla::text::check_sentencepiece_model(nfkc_model() + std::string("\xf8\x07\x05", 3), "x"));
}

TEST_CASE("an empty piece or one with a NUL byte is refused naming the file (a fuzz finding: Darts-clone threw)") {
  // The finding as libFuzzer wrote it (its last piece is "\0", an empty key to Darts-clone), kept in the fuzz seeds;
  // and an empty piece, or one with a NUL inside, put into a sound model.
  const std::string finding = std::string(PARLA_SOURCE_DIR) + "/fuzz/corpus_sentencepiece/finding_empty_piece.model";
  const std::string e = refusal([&] { SentencePieceVocab::load(finding); });
  CHECK_THAT(e, Catch::Contains(finding) && Catch::Contains("holds a NUL byte"));
  CHECK_THAT(refusal([&] { SentencePieceVocab::from_serialized(with_piece(nfkc_model(), "")); }),
             Catch::Contains("is empty"));
  CHECK_THAT(refusal([&] { SentencePieceVocab::from_serialized(with_piece(nfkc_model(), std::string("a\0b", 3))); }),
             Catch::Contains("holds a NUL byte"));
}

}  // namespace sentencepiece_model_check_test

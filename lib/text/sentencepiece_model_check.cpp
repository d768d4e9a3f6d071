#include "text/sentencepiece_model_check.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace parla::text {

namespace {

// One field of a protobuf message. Only what SentencePiece's models use is read; groups (wire types 3 and 4,
// deprecated, never written for a ModelProto) are refused rather than skipped.
struct Field {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  const char* data = nullptr;  // length-delimited payload (wire type 2)
  size_t size = 0;
};

class WireReader {
 public:
  WireReader(const char* p, size_t n) : p_(p), end_(p + n), begin_(p) {}
  bool done() const { return p_ == end_; }
  size_t offset() const { return static_cast<size_t>(p_ - begin_); }

  // False when the bytes are not a well-formed field.
  bool next(Field& f) {
    uint64_t key = 0;
    if (!varint(key) || key >> 32 != 0) return false;
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire_type = static_cast<uint32_t>(key & 7);
    if (f.number == 0) return false;
    uint64_t v = 0;
    switch (f.wire_type) {
      case 0: return varint(v);
      case 1: return skip(8);
      case 5: return skip(4);
      case 2:
        if (!varint(v) || v > static_cast<uint64_t>(end_ - p_)) return false;
        f.data = p_;
        f.size = static_cast<size_t>(v);
        p_ += f.size;
        return true;
      default: return false;
    }
  }

 private:
  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p_ == end_) return false;
      const auto b = static_cast<unsigned char>(*p_++);
      if (shift < 64) v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (b < 0x80) return true;
    }
    return false;
  }
  bool skip(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    p_ += n;
    return true;
  }
  const char* p_;
  const char* end_;
  const char* begin_;
};

// Darts-clone's unit layout (as SentencePiece's normalizer reads it): the label is the low byte, and bit 31 set marks
// a value unit, which never matches a byte; bit 8 says a leaf follows; the offset is bits 10-31, shifted left by 8
// when bit 9 is set.
bool unit_has_leaf(uint32_t u) { return ((u >> 8) & 1u) != 0; }
uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }

}  // namespace

std::string charsmap_problem(const std::string& charsmap) {
  // Layout: a little-endian uint32 trie size in bytes, the trie's units, then NUL-terminated replacement strings.
  if (charsmap.empty()) return "";  // no normalization
  auto le32 = [&charsmap](size_t at) {
    uint32_t v = 0;
    for (size_t k = 4; k-- > 0;) v = v << 8 | static_cast<unsigned char>(charsmap[at + k]);
    return v;
  };
  if (charsmap.size() <= 4)
    return "its precompiled charsmap of " + std::to_string(charsmap.size()) + " bytes has no trie";
  const uint32_t trie_bytes = le32(0);
  if (trie_bytes > charsmap.size() - 4)
    return "its precompiled charsmap's trie (" + std::to_string(trie_bytes) + " bytes) exceeds the charsmap (" +
           std::to_string(charsmap.size()) + " bytes)";
  const size_t n = trie_bytes / 4;
  std::vector<uint32_t> units(n);
  for (size_t i = 0; i < n; ++i) units[i] = le32(4 + 4 * i);
  const char* strings = charsmap.data() + 4 + trie_bytes;
  const size_t strings_size = charsmap.size() - 4 - trie_bytes;
  if (n == 0) return "its precompiled charsmap's trie is empty";
  // Every node a walk can reach is visited once. From a node at `pos`, byte c reads unit pos ^ c: any input byte
  // can follow, so the node's whole 256-unit block must lie inside the array (Darts-clone allocates whole blocks).
  auto block_inside = [n](uint32_t pos) { return (static_cast<uint64_t>(pos) | 0xffu) < n; };
  const uint32_t root = unit_offset(units[0]);
  if (!block_inside(root)) return "its precompiled charsmap's trie has its root outside the array";
  // Byte c leads from `pos` to unit q = pos ^ c only if q's label is c, so each unit has one possible parent,
  // q ^ label: children are grouped by parent once (a counting sort) rather than 256 bytes tried at every node.
  // A parent past the array (a last, partial block) is never walked to, and is left out.
  auto has_parent = [&units, n](size_t q) { return !(units[q] >> 31) && (q ^ (units[q] & 0xffu)) < n; };
  std::vector<uint32_t> first(n + 1, 0), children(n);
  for (size_t q = 0; q < n; ++q)
    if (has_parent(q)) ++first[(q ^ (units[q] & 0xffu)) + 1];
  for (size_t i = 0; i < n; ++i) first[i + 1] += first[i];
  {
    std::vector<uint32_t> fill(first.begin(), first.end() - 1);
    for (size_t q = 0; q < n; ++q)
      if (has_parent(q)) children[fill[q ^ (units[q] & 0xffu)]++] = static_cast<uint32_t>(q);
  }
  std::vector<bool> seen(n, false);
  std::vector<uint32_t> todo{root};
  seen[root] = true;
  while (!todo.empty()) {
    const uint32_t pos = todo.back();
    todo.pop_back();
    for (uint32_t k = first[pos]; k < first[pos + 1]; ++k) {
      const uint32_t q = children[k];
      const uint32_t u = units[q];
      const uint32_t child = q ^ unit_offset(u);
      if (unit_has_leaf(u)) {
        if (child >= n)
          return "its precompiled charsmap's trie points outside the array (unit " + std::to_string(q) + ")";
        const uint32_t v = unit_value(units[child]);
        if (v >= strings_size)
          return "its precompiled charsmap's trie points outside its strings (unit " + std::to_string(child) + ")";
        const size_t room = std::min(strings_size - v, kMaxCharsmapReplacementBytes + 1);
        if (!std::memchr(strings + v, '\0', room))
          return "its precompiled charsmap has a replacement that is not NUL-terminated within " +
                 std::to_string(kMaxCharsmapReplacementBytes) + " bytes (offset " + std::to_string(v) + ")";
      }
      if (!block_inside(child))
        return "its precompiled charsmap's trie points outside the array (unit " + std::to_string(q) + ")";
      if (!seen[child]) {
        seen[child] = true;
        todo.push_back(child);
      }
    }
  }
  return "";
}

namespace {

// A NormalizerSpec (ModelProto field 3, the denormalizer's is field 5): field 2 is precompiled_charsmap.
std::string normalizer_problem(const char* p, size_t size) {
  WireReader r(p, size);
  Field f;
  while (!r.done()) {
    if (!r.next(f)) return "its normalizer spec is malformed (byte " + std::to_string(r.offset()) + ")";
    if (f.number == 2 && f.wire_type == 2) {
      std::string problem = charsmap_problem(std::string(f.data, f.size));
      if (!problem.empty()) return problem;
    }
  }
  return "";
}

// A SentencePiece message (ModelProto field 1): field 1 is the piece's text.
std::string piece_problem(const char* p, size_t size, size_t index) {
  WireReader r(p, size);
  Field f;
  size_t text_bytes = 0;  // the last field 1 wins, as protobuf reads it
  while (!r.done()) {
    if (!r.next(f)) return "its piece " + std::to_string(index) + " is malformed";
    if (f.number == 1 && f.wire_type == 2) {
      if (f.size > kMaxSentencePieceBytes)
        return "its piece " + std::to_string(index) + " is " + std::to_string(f.size) + " bytes long (at most " +
               std::to_string(kMaxSentencePieceBytes) + ")";
      text_bytes = f.size;
      // Darts-clone keys are C strings: a piece with a NUL byte is cut there, "\0" becomes an empty key.
      if (std::memchr(f.data, '\0', f.size) != nullptr)
        return "its piece " + std::to_string(index) + " holds a NUL byte";
    }
  }
  // Darts-clone throws building the piece trie from an empty key (a fuzz finding: the process aborted).
  if (text_bytes == 0) return "its piece " + std::to_string(index) + " is empty";
  return "";
}

}  // namespace

void check_sentencepiece_model(const std::string& proto, const std::string& what) {
  WireReader r(proto.data(), proto.size());
  Field f;
  size_t pieces = 0;
  while (!r.done()) {
    const size_t at = r.offset();
    if (!r.next(f))
      throw DataError(what + ": not a SentencePiece model (malformed protobuf at byte " + std::to_string(at) + ")");
    // A field whose wire type does not match its declaration is an unknown field to protobuf: not read, skipped.
    if (f.wire_type != 2) continue;
    std::string problem;
    if (f.number == 1) {
      problem = piece_problem(f.data, f.size, pieces++);
    } else if (f.number == 3 || f.number == 5) {
      problem = normalizer_problem(f.data, f.size);
      if (!problem.empty() && f.number == 5) problem = "(denormalizer) " + problem;
    }
    if (!problem.empty()) throw DataError(what + ": SentencePiece model refused: " + problem);
  }
}

}  // namespace parla::text

namespace parla::text {

std::string sentencepiece_precompiled_charsmap(const std::string& proto) {
  check_sentencepiece_model(proto, "SentencePiece model");
  std::string charsmap;
  WireReader r(proto.data(), proto.size());
  Field f;
  while (!r.done() && r.next(f)) {
    if (f.number != 3 || f.wire_type != 2) continue;  // the NormalizerSpec; the last one wins, as protobuf reads it
    charsmap.clear();
    WireReader n(f.data, f.size);
    Field g;
    while (!n.done() && n.next(g))
      if (g.number == 2 && g.wire_type == 2) charsmap.assign(g.data, g.size);
  }
  return charsmap;
}

}  // namespace parla::text

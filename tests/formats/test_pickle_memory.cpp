// The unpickler's memory: pickles made of the instructions that cost most per byte (each makes a node, a mark or a
// memo entry) are refused once the parse would hold more than pickle_memory_budget (4x the pickle plus 64 MiB;
// 250-280x its size before), or parse within it. The parser's own count is checked against the process's
// resident memory (an independent measure) while a tree it accepted is alive.
#include <catch2/catch.hpp>

#include <string>

#include "core/error.h"
#include "formats/pickle.h"
#include "support/resident_memory.h"

using namespace parla::formats;

namespace {

std::string repeat(const std::string& s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

const uint8_t* bytes(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

}  // namespace

TEST_CASE("pickles of the costliest instructions are refused past the unpickler's budget or parse within it") {
  const size_t n = 1 << 20;
  const std::string proto = "\x80\x02";
  struct Shape {
    const char* name;
    std::string pickle;
  };
  const Shape shapes[] = {
      {"EMPTY_LIST", proto + "(" + repeat("]", n) + "l."},
      {"EMPTY_TUPLE", proto + "(" + repeat(")", n) + "l."},
      {"MARK nested by TUPLE", proto + repeat("(", n / 2) + repeat("t", n / 2) + "."},
      {"BININT", proto + "(" + repeat(std::string("J\x01\x00\x00\x00", 5), n / 5) + "l."},
      {"MEMOIZE", proto + "]" + repeat("\x94", n) + "."},
      {"BINGET", proto + "]\x94(" + repeat(std::string("h\x00", 2), n / 2) + "l."},
      {"NEWOBJ of a long class name", proto + "c__torch__." + std::string(4096, 'M') + "\nX\n\x94(" +
                                          repeat(std::string("h\x00)\x81", 4), 4096) + "l."},
  };
  for (const auto& shape : shapes) {
    INFO(shape.name << ", " << shape.pickle.size() << " bytes");
    const uint64_t budget = pickle_memory_budget(shape.pickle.size());
    REQUIRE(budget == 4 * shape.pickle.size() + (uint64_t{64} << 20));
    try {
      const auto tree = parse_pickle(bytes(shape.pickle), shape.pickle.size());
      CHECK(tree.accounted_bytes <= budget);
      CHECK(tree.accounted_bytes >= tree.nodes.size() * sizeof(PickleNode));  // every node counted
    } catch (const parla::DataError& e) {
      CHECK_THAT(e.what(), Catch::Contains("takes more than " + std::to_string(budget >> 20) + " MiB"));
    }
  }
  // The node shapes with 1-2 bytes per node are the ones refused at this size.
  CHECK_THROWS_WITH(parse_pickle(bytes(shapes[0].pickle), shapes[0].pickle.size()), Catch::Contains("MiB"));
  CHECK_THROWS_WITH(parse_pickle(bytes(shapes[1].pickle), shapes[1].pickle.size()), Catch::Contains("MiB"));
  // NEWOBJ copies the class name into each object: 4096 objects of a 4 KB name count 16 MB from a 30 KB pickle.
  const auto& objects = shapes[6].pickle;
  CHECK_THROWS_WITH(parse_pickle(bytes(objects), objects.size(), 8u << 20), Catch::Contains("takes more than 8 MiB"));
}

TEST_CASE("the unpickler's count of its memory is an upper bound of what its tree holds") {
  const std::string pickle = "\x80\x02(" + repeat(std::string("J\x07\x00\x00\x00", 5), 200000) + "l.";
  const long before = parla::testing::resident_process_kb();
  const auto tree = parse_pickle(bytes(pickle), pickle.size(), uint64_t{1} << 40);
  const long after = parla::testing::resident_process_kb();
  REQUIRE(tree.nodes.size() == 200001);
  CHECK(tree.at(tree.at(tree.root).items.back()).i == 7);
  INFO("resident growth " << (after - before) << " kB, counted " << (tree.accounted_bytes >> 10) << " kB");
  CHECK(static_cast<uint64_t>(after - before) * 1024 <= tree.accounted_bytes);
  CHECK(tree.accounted_bytes <= 4 * 200001 * sizeof(PickleNode));  // and not wildly above it
}

// The strict unpickler (formats/pickle.h): pickles assembled instruction by instruction, as LibTorch's TorchScript
// pickler writes them, and the instructions a hostile file would use to run code.
#include <catch2/catch.hpp>

#include <string>

#include "core/error.h"
#include "formats/pickle.h"

using namespace parla::formats;
using Kind = PickleNode::Kind;

namespace {

// Instruction builders (Python's pickle protocol 2).
std::string global(const std::string& module, const std::string& name) { return "c" + module + "\n" + name + "\n"; }
std::string str(const std::string& s) {
  std::string out = "X";
  uint32_t n = static_cast<uint32_t>(s.size());
  for (int i = 0; i < 4; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + s;
}
std::string int1(int v) { return std::string("K") + static_cast<char>(v); }
const std::string kProto = "\x80\x02";

// A TorchScript module object whose attribute dictionary is `items` (key, value instructions).
std::string module(const std::string& items) { return global("__torch__", "Module") + ")\x81}(" + items + "ub"; }

PickleTree parse_pickle_bytes(const std::string& p) { return parse_pickle(reinterpret_cast<const uint8_t*>(p.data()), p.size()); }

}  // namespace

TEST_CASE("a module with a string, an integer, a tensor and a sub-module is read as data") {
  // A [2, 3] view at offset 1 of a storage of 7 floats; "tR" closes the argument tuple and reduces.
  const std::string t = global("torch._utils", "_rebuild_tensor_v2") + "((" + str("storage") +
                        global("torch", "FloatStorage") + str("0") + str("cpu") + int1(7) + "tQ" + int1(1) + "(" +
                        int1(2) + int1(3) + "t(" + int1(3) + int1(1) + "t\x89" + global("collections", "OrderedDict") +
                        ")RtR";
  const std::string p = kProto + module(str("name") + str("value") + str("n") + int1(7) + str("w") + t + str("sub") +
                                        module(str("flag") + "\x88")) +
                        ".";
  const auto tree = parse_pickle_bytes(p);
  const auto& root = tree.at(tree.root);
  REQUIRE(root.kind == Kind::Object);
  CHECK(root.s == "__torch__.Module");
  const auto& attrs = tree.at(root.storage).items;
  REQUIRE(attrs.size() == 8);
  CHECK(tree.at(attrs[1]).s == "value");
  CHECK(tree.at(attrs[3]).i == 7);
  const auto& w = tree.at(attrs[5]);
  REQUIRE(w.kind == Kind::Tensor);
  CHECK(w.sizes == std::vector<int64_t>{2, 3});
  CHECK(w.strides == std::vector<int64_t>{3, 1});
  CHECK(w.offset == 1);
  CHECK(tree.at(w.storage).s == "0");
  CHECK(tree.at(w.storage).i == 7);
  CHECK(w.dtype == DType::F32);
  CHECK(tree.at(attrs[7]).kind == Kind::Object);
}

TEST_CASE("a tensor whose strides reach past its storage is refused") {
  // offset 1 + (2-1)*3 + (3-1)*1 = 6 is past a storage of 6 elements.
  const std::string t = global("torch._utils", "_rebuild_tensor_v2") + "((" + str("storage") +
                        global("torch", "FloatStorage") + str("0") + str("cpu") + int1(6) + "tQ" + int1(1) + "(" +
                        int1(2) + int1(3) + "t(" + int1(3) + int1(1) + "t\x89" + global("collections", "OrderedDict") +
                        ")RtR";
  CHECK_THROWS_WITH(parse_pickle_bytes(kProto + module(str("w") + t) + "."), Catch::Contains("reaches element 6"));
}

TEST_CASE("what a hostile pickle uses to run code is refused, naming it and where") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      // os.system("echo EVIL"): a global outside the allowed names.
      {kProto + global("os", "system") + str("echo EVIL") + "\x85R.", "'os.system'"},
      {kProto + global("builtins", "eval") + str("1") + "\x85R.", "'builtins.eval'"},
      // A module object whose state is not a dictionary: what __setstate__ would receive.
      {kProto + global("__torch__", "Module") + ")\x81" + str("state") + "b.", "__setstate__"},
      // REDUCE on a module class (calling it with arguments).
      {kProto + global("__torch__", "Module") + str("x") + "\x85R.", "not a function parla allows"},
      // NEWOBJ of a class with arguments.
      {kProto + global("__torch__", "Module") + str("x") + "\x85\x81.", "NEWOBJ with arguments"},
      // OrderedDict with arguments (would build it from an iterable: a call).
      {kProto + global("collections", "OrderedDict") + "]\x85R.", "OrderedDict with arguments"},
      // Text-mode and extension instructions.
      {kProto + "I1\n.", "instruction 0x49"},
      {kProto + "\x82\x01.", "instruction 0x82"},
      {kProto + "P0\n.", "instruction 0x50"},
      // A persistent id that is not a storage.
      {kProto + str("x") + "Q.", "persistent id"},
      // Malformed programs.
      {kProto + "h\x05.", "never stored"},
      {kProto + "t.", "no MARK"},
      {kProto + "N", "ends without STOP"},
      {kProto + "X\xff\xff\xff\x7f" + "abc.", "longer than the rest"},
      {kProto + std::string("\x8b\x09\x00\x00\x00", 5) + std::string(9, '\1') + ".", "wider than 64 bits"},
  };
  for (const auto& [p, says] : cases) {
    INFO(says);
    try {
      parse_pickle_bytes(p);
      FAIL("accepted");
    } catch (const parla::DataError& e) {
      CHECK_THAT(e.what(), Catch::Contains(says) && Catch::Contains("at byte"));
    }
  }
}

TEST_CASE("memo references may form cycles without leaks or endless loops, and integers of every width are read") {
  // An empty list appended to itself: [[...]].
  const auto tree = parse_pickle_bytes(kProto + std::string("]q\x00h\x00" "a.", 7));
  const auto& l = tree.at(tree.root);
  REQUIRE(l.kind == Kind::List);
  REQUIRE(l.items.size() == 1);
  CHECK(l.items[0] == tree.root);
  auto one = [](const std::string& instr) {
    const auto t = parse_pickle_bytes(kProto + instr + ".");
    REQUIRE(t.at(t.root).kind == Kind::Int);
    return t.at(t.root).i;
  };
  CHECK(one("K\xff") == 255);
  CHECK(one("M\x01\x02") == 0x0201);
  CHECK(one(std::string("J\xfe\xff\xff\xff")) == -2);
  CHECK(one(std::string("\x8a\x02\x00\x80", 4)) == -32768);
  CHECK(one(std::string("\x8a\x08\x01\x00\x00\x00\x00\x00\x00\x80", 10)) == INT64_MIN + 1);
  CHECK(one(std::string("\x8a\x00", 2)) == 0);
}

// What a Marian or MarianMT folder brings besides its weights: vocab.yml read line by line (checked against
// yaml-cpp, which Marian itself reads it with), decoder.yml's file names, and config.json's counts.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "convert/hf_marian_import.h"
#include "convert/marian_import.h"
#include "core/error.h"
#include "support/marian_folder.h"
#include "support/temp_dir.h"

using Catch::Contains;
using parla::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// The pieces of a vocab.yml as yaml-cpp reads them (Marian's own reading, and parla's before): piece of each id.
std::vector<std::string> yaml_cpp_pieces(const std::string& path) {
  const YAML::Node y = YAML::LoadFile(path);
  std::vector<std::string> pieces(y.size());
  for (const auto& kv : y) pieces.at(kv.second.as<size_t>()) = kv.first.as<std::string>();
  return pieces;
}

// Pieces that need each kind of YAML quoting.
const std::vector<std::string>& tricky_pieces() {
  static const std::vector<std::string> p = {
      "</s>", "<unk>", "\xE2\x96\x81the", "\xE2\x96\x81", ",", ".", ":", "a:b", "a: b", "-", "- x", "?", "? y", "#",
      "a #b", "'", "\"", "''", "\\", "\\n", "[", "]", "{", "}", "&a", "*b", "!c", "|", ">", "%", "@", "`", "---",
      "...", "true", "no", "123", "0x10", "1e3", " lead", "trail ", "\t", "caf\xC3\xA9", "\xF0\x9F\x98\x80",
      "\x01", "\x7f", "\xC2\x85", "\xE2\x80\xA8", "Null", "x\"y", "x'y", ",a", "a,b"};
  return p;
}

}  // namespace

TEST_CASE("vocab.yml as yaml-cpp's emitter writes it (Marian) reads as yaml-cpp reads it") {
  TempDir dir("marian-vocab");
  YAML::Emitter out;
  out << YAML::BeginMap;
  const auto& pieces = tricky_pieces();
  for (size_t i = 0; i < pieces.size(); ++i) out << YAML::Key << pieces[i] << YAML::Value << i;
  out << YAML::EndMap;
  const auto path = dir.write("vocab.yml", std::string(out.c_str()) + "\n");
  const auto expected = yaml_cpp_pieces(path);
  REQUIRE(expected == pieces);
  CHECK(parla::convert::read_marian_vocab(path) == expected);
}

TEST_CASE("vocab.yml as PyYAML and JSON dumps write it, ids in any order, reads as yaml-cpp reads it") {
  TempDir dir("marian-vocab-py");
  // Single-quoted with '' for a quote, double-quoted with YAML's escapes, plain; comments and blank lines.
  const std::string text =
      "# written by hand\n"
      "'''': 3\n"
      "\"\\u2581x\\t\\\"\\\\\\x41\\U0001F600\": 0\n"
      "'a: b': 5   # a comment\n"
      "\n"
      "plain piece: 1\n"
      "\"\\N\\_\\L\\P\\0\\e\\/\": 4\r\n"
      "~: 2\n"
      "\"caf\\u00e9\": 6\n";
  const auto path = dir.write("vocab.yml", text);
  const auto expected = yaml_cpp_pieces(path);
  REQUIRE(expected.size() == 7);
  CHECK(parla::convert::read_marian_vocab(path) == expected);
}

TEST_CASE("a vocab.yml that is not one flat 'piece: id' map is refused naming the file and the line") {
  TempDir dir("marian-vocab-bad");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a: 0\n  b: 1\n", "line 2"},                 // indented: another YAML shape
      {"{a: 0, b: 1}\n", "line 1"},                 // a flow map
      {"a: 0\n- b\n", "line 2"},                    // a sequence
      {"a: 0\nb: x\n", "line 2"},                   // not an id
      {"a: 0\nb: -1\n", "line 2"},                  // negative
      {"a: 0\n\"b: 1\n", "line 2"},                 // unterminated quote
      {"a: 0\n\"\\q\": 1\n", "line 2"},             // unknown escape
      {"a: 0\nb: 5\n", "out of range or given twice"},
      {"a: 0\nb: 0\n", "out of range or given twice"},
      {"", "not a YAML map"},
      {"a: 99999999999999999999\n", "line 1"},
  };
  for (const auto& [text, says] : cases) {
    INFO(text);
    const auto path = dir.write("vocab.yml", text);
    CHECK_THROWS_WITH(parla::convert::read_marian_vocab(path), Contains(path) && Contains(says));
  }
}

TEST_CASE("decoder.yml naming a file outside its folder, or a vocabulary of a short name, is refused up front") {
  TempDir dir("marian-decoder");
  const std::string folder = dir.file("m");
  fs::create_directories(folder);
  fs::create_directories(dir.file("elsewhere"));
  std::ofstream(dir.file("elsewhere/model.npz")) << "x";
  fs::create_symlink(dir.file("elsewhere/model.npz"), folder + "/link.npz");
  fs::create_directory_symlink(dir.file("elsewhere"), folder + "/sub");
  auto decoder = [&](const std::string& model, const std::string& vocab) {
    std::ofstream(folder + "/decoder.yml") << "models:\n  - " << model << "\nvocabs:\n  - " << vocab << "\n  - "
                                           << vocab << "\n";
  };
  const std::string decoder_path = folder + "/decoder.yml";
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"../elsewhere/model.npz", "vocab.yml", "'models' names '../elsewhere/model.npz', a path through '..'"},
      {dir.file("elsewhere/model.npz"), "vocab.yml", "an absolute path"},
      {"link.npz", "vocab.yml", "a symbolic link"},
      {"sub/model.npz", "vocab.yml", "a symbolic link"},
      {"model.npz", "../vocab.yml", "'vocabs' names '../vocab.yml'"},
      {"model.npz", "/etc/vocab.yml", "an absolute path"},
      {"model.npz", "a.ym", "vocabulary 'a.ym' is not a .vocab.yml"},  // was a raw basic_string::compare
      {"model.npz", "yml", "vocabulary 'yml' is not a .vocab.yml"},
  };
  for (const auto& [model, vocab, says] : cases) {
    INFO(model << " " << vocab);
    decoder(model, vocab);
    CHECK_THROWS_WITH(parla::convert::read_marian(folder), Contains(decoder_path) && Contains(says));
  }
}

TEST_CASE("config.json counts out of an int's range are refused naming the key, not narrowed") {
  TempDir dir("hf-counts");
  const auto folder = parla::testing::write_marian_folder(dir, "m");
  const std::string config = folder + "/config.json";
  std::ifstream in(config);
  const auto original = nlohmann::json::parse(in);
  for (const char* key : {"encoder_layers", "decoder_layers", "d_model", "encoder_ffn_dim", "max_position_embeddings"})
    for (const auto& value :
         {nlohmann::json(4294967298LL), nlohmann::json(0), nlohmann::json(18446744073709551615ULL)}) {
      INFO(key << " = " << value.dump());
      auto j = original;
      j[key] = value;
      if (std::string(key) == "encoder_ffn_dim") j["decoder_ffn_dim"] = value;
      std::ofstream(config) << j.dump();
      CHECK_THROWS_WITH(parla::convert::read_hf_marian(folder),
                        Contains(config) && Contains(std::string("'") + key + "'") && Contains("out of range"));
    }
}

TEST_CASE("a decoder.yml nested 200,000 deep is one error naming it, not a stack overflow") {
  // yaml-cpp's parser recurses per level; since 0.7 it stops at 2,000 (DeepRecursion). This holds parla to that.
  TempDir dir("marian-deep-yaml");
  const std::string folder = dir.file("m");
  fs::create_directories(folder);
  const std::string decoder_path = folder + "/decoder.yml";
  const int n = 200000;
  std::string compact = "models:\n";
  for (int i = 0; i < n; ++i) compact += "- ";  // a block sequence of sequences
  for (const std::string& body : {"models: " + std::string(n, '[') + std::string(n, ']') + "\n", compact + "x\n"}) {
    std::ofstream(decoder_path) << body;
    CHECK_THROWS_WITH(parla::convert::read_marian(folder), Contains(decoder_path) && Contains("not valid YAML"));
  }
}

TEST_CASE("vocab.json is read member by member: ids in any order, a piece or an id given twice refused") {
  TempDir dir("hf-vocab");
  const auto folder = parla::testing::write_marian_folder(dir, "m");
  const std::string vocab = folder + "/vocab.json";
  std::ifstream in(vocab);
  const auto original = nlohmann::json::parse(in);
  in.close();
  // The same pieces written in reverse order of their ids import as before.
  std::string reversed = "{";
  std::vector<std::pair<int64_t, std::string>> by_id;
  for (auto it = original.begin(); it != original.end(); ++it) by_id.push_back({it.value().get<int64_t>(), it.key()});
  std::sort(by_id.rbegin(), by_id.rend());
  for (const auto& [id, piece] : by_id)
    reversed += (reversed.size() > 1 ? "," : "") + nlohmann::json(piece).dump() + ":" + std::to_string(id);
  std::ofstream(vocab) << reversed << "}";
  const auto imported = parla::convert::read_hf_marian(folder);
  std::vector<std::string> expected(by_id.size());
  for (const auto& [id, piece] : by_id) expected.at(static_cast<size_t>(id)) = piece;
  // parla renumbers the specials, so the pieces are compared as sets.
  auto got = imported.src_pieces;
  std::sort(got.begin(), got.end());
  std::sort(expected.begin(), expected.end());
  CHECK(got == expected);
  // A piece given twice (JSON would keep the last and lose an id) and an id given twice are refused.
  const std::string first = by_id.back().second;
  std::ofstream(vocab) << reversed << "," << nlohmann::json(first).dump() << ":" << by_id.size() << "}";
  CHECK_THROWS_WITH(parla::convert::read_hf_marian(folder), Contains(vocab) && Contains("given twice"));
  std::ofstream(vocab) << reversed << ",\"new piece\":0}";
  CHECK_THROWS_WITH(parla::convert::read_hf_marian(folder), Contains(vocab) && Contains("given twice"));
}

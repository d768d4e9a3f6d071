#include <catch2/catch.hpp>

#include <fstream>

#include "core/config.h"
#include "support/temp_dir.h"

using parla::ConfigError;
using parla::config::ConfigBuilder;
using parla::config::json;
using Catch::Matchers::Contains;

namespace {
// The message of the ConfigError that `fn` throws (fails the test if it throws none).
template <class F>
std::string config_error(F&& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  FAIL("expected a ConfigError");
  return "";
}
}  // namespace

TEST_CASE("config: defaults come from the section structs") {
  auto c = ConfigBuilder().build();
  CHECK(c.runtime.threads == parla::RuntimeConfig{}.threads);
  CHECK(c.data.clean.max_tokens == parla::CleanConfig{}.max_tokens);
  CHECK(c.training.lr == parla::TrainingConfig{}.lr);
}

TEST_CASE("config: a file sets keys, including nested sections, and --set overrides the file") {
  parla::testing::TempDir dir("config");
  auto path = dir.write("c.json", R"({"runtime": {"threads": 3}, "data": {"src_lang": "de", "clean": {"max_tokens": 80}},
                                     "training": {"lr": 0.001}})");
  ConfigBuilder b;
  b.load_file(path);
  b.set_assignment("training.lr=0.0007");
  b.set_assignment("data.tgt_lang=en");  // a bare word is a string
  auto c = b.build();
  CHECK(c.runtime.threads == 3);
  CHECK(c.data.src_lang == "de");
  CHECK(c.data.tgt_lang == "en");
  CHECK(c.data.clean.max_tokens == 80);
  CHECK(c.training.lr == Approx(0.0007).epsilon(0));
  CHECK(b.given("data.clean.max_tokens"));
  CHECK_FALSE(b.given("data.valid_size"));
}

TEST_CASE("config: an unknown key names the key and the file and suggests the nearest valid key") {
  parla::testing::TempDir dir("config");
  auto path = dir.write("typo.json", R"({"training": {"lrr": 0.1}})");
  auto msg = config_error([&] { ConfigBuilder().load_file(path); });
  CHECK_THAT(msg, Contains(path));
  CHECK_THAT(msg, Contains("unknown key 'training.lrr'"));
  CHECK_THAT(msg, Contains("did you mean 'training.lr'"));
}

TEST_CASE("config: an unknown section suggests the nearest section") {
  auto msg = config_error([] { ConfigBuilder().merge(json::parse(R"({"trainig": {}})"), "x.json"); });
  CHECK_THAT(msg, Contains("unknown key 'trainig'"));
  CHECK_THAT(msg, Contains("did you mean 'training'"));
}

TEST_CASE("config: a value of the wrong type names the key, the file and both types") {
  auto msg = config_error([] { ConfigBuilder().merge(json::parse(R"({"runtime": {"threads": "two"}})"), "t.json"); });
  CHECK_THAT(msg, Contains("t.json"));
  CHECK_THAT(msg, Contains("runtime.threads"));
  CHECK_THAT(msg, Contains("expected an int"));
  CHECK_THAT(msg, Contains("string"));
  // A fraction is not an int, a whole float is.
  CHECK_THROWS_AS(ConfigBuilder().merge(json::parse(R"({"runtime": {"threads": 1.5}})"), "t.json"), ConfigError);
  ConfigBuilder b;
  b.merge(json::parse(R"({"runtime": {"threads": 2.0}})"), "t.json");
  CHECK(b.build().runtime.threads == 2);
}

TEST_CASE("config: a value out of range names the key and the allowed range") {
  auto msg = config_error([] { ConfigBuilder().set_assignment("training.lr=-1"); });
  CHECK_THAT(msg, Contains("--set training.lr=-1"));
  CHECK_THAT(msg, Contains("training.lr"));
  CHECK_THAT(msg, Contains("out of range"));
  CHECK_THAT(msg, Contains("> 0"));
}

TEST_CASE("config: model.rnn_layers is bounded (a checkpoint's 12,000 took minutes to build)") {
  ConfigBuilder ok;
  ok.set_assignment("model.rnn_layers=128");
  CHECK(ok.build().model.rnn_layers == 128);
  auto msg = config_error([] { ConfigBuilder().set_assignment("model.rnn_layers=129"); });
  CHECK_THAT(msg, Contains("model.rnn_layers"));
  CHECK_THAT(msg, Contains("out of range"));
}

TEST_CASE("config: a string outside its choices lists them and suggests the nearest") {
  auto msg = config_error([] { ConfigBuilder().set_assignment("decoding.precision=fp322"); });
  CHECK_THAT(msg, Contains("one of: fp32, bf16, fp16"));
  CHECK_THAT(msg, Contains("did you mean 'fp32'"));
}

// Choice keys are enums once parsed: each documented name reads to a value that writes back as the same name, and
// anything else is refused naming the key and its choices, for every such key of the schema.
TEST_CASE("config: every choice key reads and writes each of its names, and refuses any other") {
  int keys = 0;
  for (const auto& key : parla::config::all_keys()) {
    const auto dot = key.rfind('.');
    parla::config::KeyInfo info;
    for (const auto& k : parla::config::section_keys(key.substr(0, dot)))
      if (k.key == key.substr(dot + 1)) info = k;
    const std::string prefix = "one of: ";
    if (info.constraint.rfind(prefix, 0) != 0) continue;
    ++keys;
    INFO(key);
    std::vector<std::string> names;
    std::string list = info.constraint.substr(prefix.size());
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = list.find(", ", at);
      names.push_back(list.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
      if (comma == std::string::npos) break;
      at = comma + 2;
    }
    std::string pointer = "/" + key;
    for (auto& ch : pointer)
      if (ch == '.') ch = '/';
    for (const auto& name : names) {
      ConfigBuilder b;
      b.set(key, name, "test");
      json written;
      try {
        written = parla::config::to_json(b.build())[json::json_pointer(pointer)];
      } catch (const parla::ConfigError& e) {
        // A check across keys (training.schedule cosine needs training.max_steps), not this key's choices.
        CHECK_THAT(e.what(), !Contains("one of:"));
        continue;
      }
      CHECK(written == name);
    }
    auto msg = config_error([&] { ConfigBuilder().set(key, "no-such-choice", "test"); });
    CHECK_THAT(msg, Contains(key));
    CHECK_THAT(msg, Contains(info.constraint));
  }
  CHECK(keys >= 20);  // model.type, decoding.precision, training.task, ... (a schema that lost its choices fails)
}

TEST_CASE("config: runtime.device takes cpu, cuda, cuda:N or auto and names the key otherwise") {
  for (const char* ok : {"cpu", "cuda", "cuda:0", "cuda:12", "auto"}) {
    ConfigBuilder b;
    b.set_assignment(std::string("runtime.device=") + ok);
    CHECK(b.build().runtime.device == ok);
  }
  for (const char* bad : {"cpuu", "cuda:", "cuda:x", "cuda:-1", "gpu", "CUDA"}) {
    auto msg = config_error([&] {
      ConfigBuilder b;
      b.set_assignment(std::string("runtime.device=") + bad);
      b.build();
    });
    CHECK_THAT(msg, Contains("runtime.device"));
    CHECK_THAT(msg, Contains(bad));
    CHECK_THAT(msg, Contains("cpu, cuda, cuda:N or auto"));
  }
}

TEST_CASE("config: a missing required key names the key and the file") {
  parla::testing::TempDir dir("config");
  auto path = dir.write("empty.json", "{}");
  ConfigBuilder b;
  b.load_file(path);
  auto msg = config_error([&] { b.require("data.src_lang", "or give --src-lang"); });
  CHECK_THAT(msg, Contains("missing required key 'data.src_lang'"));
  CHECK_THAT(msg, Contains(path));
  CHECK_THAT(msg, Contains("--src-lang"));
  b.set("data.src_lang", "de", "--src-lang");
  CHECK_NOTHROW(b.require("data.src_lang"));
}

TEST_CASE("config: malformed --set and unreadable or invalid files are config errors naming the source") {
  CHECK_THAT(config_error([] { ConfigBuilder().set_assignment("training.lr"); }), Contains("KEY=VALUE"));
  CHECK_THAT(config_error([] { ConfigBuilder().load_file("/nonexistent/parla.json"); }),
             Contains("/nonexistent/parla.json"));
  parla::testing::TempDir dir("config");
  auto path = dir.write("bad.json", "{\"training\": {\"lr\": }");
  auto msg = config_error([&] { ConfigBuilder().load_file(path); });
  CHECK_THAT(msg, Contains(path));
  CHECK_THAT(msg, Contains("invalid JSON"));
  CHECK_THAT(config_error([] { ConfigBuilder().merge(json::parse(R"({"data": {"clean": 3}})"), "n.json"); }),
             Contains("section 'data.clean' must be a JSON object"));
}

TEST_CASE("config: the dumped effective config reads back to the same config") {
  ConfigBuilder b;
  b.set_assignment("training.lr=0.003");
  b.set_assignment("data.clean.drop_identical=true");
  json dumped = parla::config::to_json(b.build());
  ConfigBuilder again;
  again.merge(dumped, "dump");
  CHECK(parla::config::to_json(again.build()) == dumped);
  CHECK(dumped["data"]["clean"]["drop_identical"] == true);
  // Every key of the schema appears in the dump.
  for (const auto& key : parla::config::all_keys()) {
    json::json_pointer ptr("/" + [&] {
      std::string p = key;
      for (auto& ch : p)
        if (ch == '.') ch = '/';
      return p;
    }());
    CHECK(dumped.contains(ptr));
  }
}

TEST_CASE("config: nearest-key suggestions use edit distance and refuse far-fetched ones") {
  CHECK(parla::config::edit_distance("kitten", "sitting") == 3);
  CHECK(parla::config::edit_distance("", "abc") == 3);
  CHECK(parla::config::nearest("beam_szie", {"beam_size", "length_penalty"}) == "beam_size");
  CHECK(parla::config::nearest("zzzzzzzz", {"beam_size", "lr"}).empty());
}

TEST_CASE("config: docs/CONFIG.md is the reference generated from the schema") {
  std::string expected = parla::config::reference_markdown();
  std::string doc_path = std::string(PARLA_SOURCE_DIR) + "/docs/CONFIG.md";
  if (const char* update = std::getenv("PARLA_UPDATE_DOCS"); update && std::string(update) == "1") {
    std::ofstream(doc_path, std::ios::binary) << expected;
  }
  std::ifstream in(doc_path, std::ios::binary);
  std::string actual((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO("docs/CONFIG.md is out of date: run tools/gen-config-doc.sh");
  CHECK(actual == expected);
  for (const auto& key : parla::config::all_keys()) {
    auto dot = key.rfind('.');
    CHECK_THAT(expected, Contains("`" + key.substr(dot + 1) + "`"));
  }
}

TEST_CASE("config: a choice enum is its name in JSON, written and compared, and a wrong name is refused") {
  const parla::Config c = ConfigBuilder().build();
  const json j = {{"task", c.training.task}, {"type", c.model.type}};
  CHECK(j == json::parse(R"({"task": "translation", "type": "transformer"})"));
  CHECK(json("transformer") == c.model.type);
  CHECK(json("rnn") != c.model.type);
  CHECK(json("cosine").get<parla::LrScheduleKind>() == parla::LrScheduleKind::kCosine);
  CHECK_THROWS_WITH(json("cosines").get<parla::LrScheduleKind>(),
                    Contains("one of: inverse_sqrt, constant, cosine"));
}

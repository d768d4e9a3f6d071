// Importing damaged or foreign model folders: a small MarianMT folder written by hand (support/marian_folder.h),
// then broken one file at a time. Each is one error naming the file (and key), exit 1, and no checkpoint written.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "models/checkpoint.h"
#include "models/tensor_archive.h"
#include "support/marian_folder.h"
#include "support/run.h"
#include "support/temp_dir.h"

using parla::testing::TempDir;
namespace fs = std::filesystem;

namespace {

void edit_json(const std::string& path, const std::function<void(nlohmann::json&)>& edit) {
  std::ifstream in(path);
  auto j = nlohmann::json::parse(in);
  edit(j);
  std::ofstream(path) << j.dump();
}

}  // namespace

TEST_CASE("a MarianMT folder written by hand imports, translates, averages and quantizes, and each broken file is one "
          "error naming it") {
  TempDir dir("import-errors");
  const auto good = parla::testing::write_marian_folder(dir, "good");
  const auto out = dir.file("out.pt");
  auto ok = parla::testing::run("parla-convert", {"hf", good, "-o", out});
  INFO(ok.err);
  REQUIRE(ok.exit_code == 0);
  const auto input = dir.write("in.txt", "the dog\na small green tree\n");
  auto t = parla::testing::run("parla-translate", {"-q", "-m", out, "-b", "2"}, input);
  CHECK(t.exit_code == 0);
  CHECK(std::count(t.out.begin(), t.out.end(), '\n') == 2);
  // The imported checkpoint is an ordinary one: averaging it with itself gives the same translations, and
  // quantizing it gives an int8 checkpoint that translates.
  const auto avg = dir.file("avg.pt"), int8 = dir.file("int8.pt");
  REQUIRE(parla::testing::run("parla-train", {"-q", "average", out, out, "-o", avg}).exit_code == 0);
  CHECK(parla::testing::run("parla-translate", {"-q", "-m", avg, "-b", "2"}, input).out == t.out);
  REQUIRE(parla::testing::run("parla-train", {"-q", "quantize", "-o", int8, out}).exit_code == 0);
  auto q = parla::testing::run("parla-translate", {"-q", "-m", int8, "-b", "2"}, input);
  CHECK(q.exit_code == 0);
  CHECK(std::count(q.out.begin(), q.out.end(), '\n') == 2);
  fs::remove(out);

  struct Case {
    std::string name, says;
    std::function<void(const std::string&)> damage;
  };
  const std::vector<Case> cases = {
      {"missing vocab.json", "vocab.json", [](const std::string& f) { fs::remove(f + "/vocab.json"); }},
      {"missing source.spm", "source.spm", [](const std::string& f) { fs::remove(f + "/source.spm"); }},
      {"config d_model differs from the weights", "config.json says",
       [](const std::string& f) { edit_json(f + "/config.json", [](auto& j) { j["d_model"] = 16; }); }},
      {"vocabulary of another size than the embeddings", "vocab_size",
       [](const std::string& f) { edit_json(f + "/vocab.json", [](auto& j) { j["extra-piece"] = j.size(); }); }},
      {"another architecture", "model_type",
       [](const std::string& f) { edit_json(f + "/config.json", [](auto& j) { j["model_type"] = "bart"; }); }},
      {"a key of the wrong type", "'encoder_layers' is not an integer",
       [](const std::string& f) { edit_json(f + "/config.json", [](auto& j) { j["encoder_layers"] = "one"; }); }},
      {"pre-norm", "normalize_before",
       [](const std::string& f) { edit_json(f + "/config.json", [](auto& j) { j["normalize_before"] = true; }); }},
      {"truncated weights", "model.safetensors",
       [](const std::string& f) { fs::resize_file(f + "/model.safetensors", fs::file_size(f + "/model.safetensors") / 2); }},
      {"a weight left over", "has no place",
       [](const std::string& f) {
         auto a = parla::models::TensorArchive::load(f + "/model.safetensors");
         a.write("model.encoder.layernorm_embedding.weight", torch::ones({8}));
         a.save(f + "/model.safetensors");
       }},
      {"only a pytorch_model.bin that is not a zip", "legacy format",
       [](const std::string& f) {
         fs::rename(f + "/model.safetensors", f + "/pytorch_model.bin");
       }},
      {"not JSON", "not valid JSON", [](const std::string& f) { std::ofstream(f + "/config.json") << "{\"d_model\": "; }},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    const auto folder = parla::testing::write_marian_folder(dir, "case");
    c.damage(folder);
    auto r = parla::testing::run("parla-convert", {"hf", folder, "-o", out});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(c.says));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(out));
    fs::remove_all(folder);
  }
  // An output that cannot be written: exit 1 naming it, nothing left behind.
  auto unwritable = parla::testing::run("parla-convert", {"hf", good, "-o", "/nonexistent-parla/x.pt"});
  CHECK(unwritable.exit_code == 1);
  CHECK_THAT(unwritable.err, Catch::Contains("/nonexistent-parla/x.pt"));
  // A Marian folder without decoder.yml.
  auto marian = parla::testing::run("parla-convert", {"marian", good, "-o", out});
  CHECK(marian.exit_code == 1);
  CHECK_THAT(marian.err, Catch::Contains("decoder.yml"));
}

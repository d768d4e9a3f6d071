// Exporting parla models to the tools users deploy, checked by those tools themselves: CTranslate2
// (tools/export-ctranslate2.py, translated by ctranslate2) and Hugging Face MarianMT (parla-convert to-hf,
// translated by transformers), on the shared Multi30k model and test_2016_flickr (its first PARLA_EXPORT_LINES
// lines, 200 by default; docs/RESULTS.md has the whole test set), greedy and beam 5 ranked by log-probability.
// Skipped without the Python packages or ../shared.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/config.h"
#include "models/checkpoint.h"
#include "models/factory.h"
#include "models/transformer.h"
#include "models/tiny_config.h"
#include "support/python.h"
#include "support/run.h"
#include "support/temp_dir.h"
#include "support/tiny_checkpoint.h"

using parla::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kShared = std::string(PARLA_SHARED_DIR) + "/models/multi30k-en-de-small/average.pt";
const std::string kTest = std::string(PARLA_SHARED_DIR) + "/data/multi30k/test_2016_flickr.en";

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

std::string first_lines(const TempDir& dir, const std::string& path) {
  const char* env = std::getenv("PARLA_EXPORT_LINES");
  const size_t n = env ? static_cast<size_t>(std::stoul(env)) : 200;
  auto lines = lines_of(path);
  if (lines.size() > n) lines.resize(n);
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  return dir.write("input.txt", text);
}

std::string script(const std::string& name) { return std::string(PARLA_SOURCE_DIR) + "/" + name; }

std::vector<std::string> translate_parla(const TempDir& dir, const std::string& ckpt, const std::string& input,
                                         int beam, const std::string& tag) {
  const auto out = dir.file("parla-" + tag + ".txt");
  auto r = parla::testing::run("parla-translate", {"-q", "-m", ckpt, "-i", input, "-o", out, "-b",
                                                   std::to_string(beam), "--length-penalty", "0", "--threads", "2"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return lines_of(out);
}

std::vector<std::string> translate_python(const TempDir& dir, const std::string& python, const std::string& tool,
                                          const std::string& model, const std::string& input, int beam,
                                          const std::string& tag) {
  const auto out = dir.file(tag + ".txt");
  auto r = parla::testing::run(python, {script(tool), model, input, out, "--beam", std::to_string(beam)});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return lines_of(out);
}

// log P(target | source) under the checkpoint's model, </s> included: how a differing line is judged.
double sequence_logprob(parla::models::LoadedSeq2Seq& m, const std::string& ckpt, const std::string& source,
                        const std::string& target) {
  auto sv = parla::models::source_vocab(m.meta, ckpt), tv = parla::models::target_vocab(m.meta, ckpt);
  auto s = sv.encode(source), t = tv.encode(target);
  std::vector<int64_t> src(s.begin(), s.end()), out(t.begin(), t.end());
  src.push_back(parla::kEosId);
  out.push_back(parla::kEosId);
  std::vector<int64_t> in = {m.model->start_id()};
  in.insert(in.end(), out.begin(), out.end() - 1);
  torch::NoGradGuard g;
  auto logp = torch::log_softmax(m.model->forward(torch::tensor(src).view({1, -1}), torch::tensor(in).view({1, -1})), -1)[0];
  double sum = 0;
  for (size_t k = 0; k < out.size(); ++k) sum += logp[static_cast<int64_t>(k)][out[k]].item<double>();
  return sum;
}

// At least 99% of the lines identical; the others are printed with both translations' log-probabilities under
// parla's model (a positive gap: the other tool found the more probable translation).
void check_mostly_identical(const std::vector<std::string>& a, const std::vector<std::string>& b, const std::string& what,
                            const std::string& ckpt, const std::string& input) {
  REQUIRE(a.size() == b.size());
  const auto sources = lines_of(input);
  std::optional<parla::models::LoadedSeq2Seq> model;
  size_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) {
      ++same;
      continue;
    }
    if (!model) model = parla::models::load_seq2seq(ckpt);
    const double ours = sequence_logprob(*model, ckpt, sources[i], a[i]);
    const double theirs = sequence_logprob(*model, ckpt, sources[i], b[i]);
    WARN(what << " line " << i + 1 << " differs (log P parla " << ours << ", other " << theirs << ", gap "
              << theirs - ours << "):\n  parla: " << a[i] << "\n  other: " << b[i]);
  }
  WARN(what << ": " << same << " of " << a.size() << " lines identical");
  CHECK(static_cast<double>(same) >= 0.99 * static_cast<double>(a.size()));
}

}  // namespace

TEST_CASE("the shared model exported to CTranslate2 translates as parla-translate does, greedy and beam 5", "[python]") {
  const std::string python = parla::testing::python_with("ctranslate2");
  if (python.empty()) return;
  if (!fs::exists(kShared) || !fs::exists(kTest)) {
    std::printf("PARLA-SKIP: needs ../shared/models and ../shared/data\n");
    return;
  }
  TempDir dir("export-ct2");
  const auto input = first_lines(dir, kTest);
  const auto model = dir.file("ct2");
  auto r = parla::testing::run(python, {script("tools/export-ctranslate2.py"), kShared, model});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  for (int beam : {1, 5}) {
    INFO("beam " << beam);
    check_mostly_identical(translate_parla(dir, kShared, input, beam, "b" + std::to_string(beam)),
                           translate_python(dir, python, "tests/convert/translate_with_ctranslate2.py", model, input,
                                            beam, "ct2-b" + std::to_string(beam)),
                           "CTranslate2 beam " + std::to_string(beam), kShared, input);
  }
  // The output folder exists now: a second export refuses to overwrite it (exit 2), and leaves it as it was.
  auto again = parla::testing::run(python, {script("tools/export-ctranslate2.py"), kShared, model});
  CHECK(again.exit_code == 2);
  CHECK_THAT(again.err, Catch::Contains(model) && Catch::Contains("exists"));
  CHECK(fs::exists(model + "/model.bin"));
}

TEST_CASE("the shared model exported as a MarianMT folder translates under transformers as under parla, and "
          "imported back gives byte-identical translations", "[python]") {
  const std::string python = parla::testing::python_with("transformers");
  if (python.empty()) return;
  if (!fs::exists(kShared) || !fs::exists(kTest)) {
    std::printf("PARLA-SKIP: needs ../shared/models and ../shared/data\n");
    return;
  }
  TempDir dir("export-hf");
  const auto input = first_lines(dir, kTest);
  const auto folder = dir.file("hf");
  auto r = parla::testing::run("parla-convert", {"to-hf", kShared, "-o", folder});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto parla_b1 = translate_parla(dir, kShared, input, 1, "b1");
  const auto parla_b5 = translate_parla(dir, kShared, input, 5, "b5");
  check_mostly_identical(parla_b1, translate_python(dir, python, "tests/convert/translate_with_transformers.py", folder,
                                                    input, 1, "hf-b1"),
                         "transformers greedy", kShared, input);
  check_mostly_identical(parla_b5, translate_python(dir, python, "tests/convert/translate_with_transformers.py", folder,
                                                    input, 5, "hf-b5"),
                         "transformers beam 5", kShared, input);
  // Back into parla: the same translations, byte for byte.
  const auto back = dir.file("back.pt");
  auto imp = parla::testing::run("parla-convert", {"hf", folder, "-o", back});
  INFO(imp.err);
  REQUIRE(imp.exit_code == 0);
  CHECK(translate_parla(dir, back, input, 1, "back-b1") == parla_b1);
  CHECK(translate_parla(dir, back, input, 5, "back-b5") == parla_b5);
  // An existing output folder is refused, and left alone.
  auto again = parla::testing::run("parla-convert", {"to-hf", kShared, "-o", folder});
  CHECK(again.exit_code == 2);
  CHECK_THAT(again.err, Catch::Contains(folder));
}

TEST_CASE("a pre-norm model (gelu, a logit bias, separate vocabularies) exports to CTranslate2, which gives every "
          "forced token parla's log-probability, and the MarianMT export refuses it, pointing to CTranslate2",
          "[python]") {
  TempDir dir("export-prenorm");
  auto layers = parla::testing::tiny_transformer();
  layers.norm = parla::LayerNormPlacement::kPre;
  layers.activation = parla::Activation::kGelu;
  layers.output_bias = true;
  layers.share_embeddings = false;
  const auto ckpt = dir.file("pre.pt");
  parla::testing::write_tiny_checkpoint(ckpt, 5, layers, /*target_vocab_size=*/36);
  {
    // A logit bias in the export too (the model's random weights are what the test compares, not its output).
    auto loaded = parla::models::load_seq2seq(ckpt);
    auto* t = dynamic_cast<parla::models::TransformerModel*>(loaded.model.get());
    REQUIRE(t);
    torch::NoGradGuard g;
    t->output_bias.normal_(0.0, 0.5);
    parla::models::save_checkpoint(ckpt, *loaded.model, loaded.meta);
  }
  auto hf = parla::testing::run("parla-convert", {"to-hf", ckpt, "-o", dir.file("hf")});
  CHECK(hf.exit_code == 1);
  CHECK_THAT(hf.err, Catch::Contains(ckpt) && Catch::Contains("pre") && Catch::Contains("CTranslate2"));
  CHECK_FALSE(fs::exists(dir.file("hf")));
  const std::string python = parla::testing::python_with("ctranslate2");
  if (python.empty()) return;
  const auto model = dir.file("ct2");
  auto r = parla::testing::run(python, {script("tools/export-ctranslate2.py"), ckpt, model});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  // Forced scoring: CTranslate2's log-probability of every target token against parla's own.
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"the house is small", "a dog runs fast"}, {"we see the green tree", "the tree is green"},
      {"small green dog", "we see a small house"}, {"the tree", "dog"}};
  std::string sources, targets;
  for (const auto& [s, t] : pairs) {
    sources += s + "\n";
    targets += t + "\n";
  }
  const auto out = dir.file("scores.jsonl");
  auto scored = parla::testing::run(python, {script("tests/convert/translate_with_ctranslate2.py"), model,
                                             dir.write("src.txt", sources), out, "--score",
                                             dir.write("tgt.txt", targets)});
  INFO(scored.err);
  REQUIRE(scored.exit_code == 0);
  auto loaded = parla::models::load_seq2seq(ckpt);
  REQUIRE(loaded.meta.src_vocab_size != loaded.meta.tgt_vocab_size);  // two vocabularies, as the test means
  auto src_vocab = parla::models::source_vocab(loaded.meta, ckpt), tgt_vocab = parla::models::target_vocab(loaded.meta, ckpt);
  std::ifstream in(out);
  torch::NoGradGuard g;
  for (const auto& [s, t] : pairs) {
    INFO(s << " -> " << t);
    std::string line;
    REQUIRE(std::getline(in, line));
    const auto theirs = nlohmann::json::parse(line).get<std::vector<double>>();
    auto src_ids = src_vocab.encode(s);
    std::vector<int64_t> src(src_ids.begin(), src_ids.end());
    src.push_back(parla::kEosId);
    auto tgt_ids = tgt_vocab.encode(t);
    std::vector<int64_t> tgt(tgt_ids.begin(), tgt_ids.end());
    tgt.push_back(parla::kEosId);
    std::vector<int64_t> tgt_in = {loaded.model->start_id()};
    tgt_in.insert(tgt_in.end(), tgt.begin(), tgt.end() - 1);
    auto logp = torch::log_softmax(loaded.model->forward(torch::tensor(src).view({1, -1}),
                                                         torch::tensor(tgt_in).view({1, -1})), -1)[0];
    REQUIRE(theirs.size() == tgt.size());
    for (size_t k = 0; k < tgt.size(); ++k)
      CHECK(std::abs(logp[static_cast<int64_t>(k)][tgt[k]].item<double>() - theirs[k]) < 1e-4);
  }
}

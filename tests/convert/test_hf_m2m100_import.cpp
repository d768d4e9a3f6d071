// Importing Hugging Face M2M-100 and NLLB-200 folders, against transformers itself: tests/convert/hf_m2m100_fixture.py
// builds a small model of each kind with random weights and the tokenizer transformers writes, and records what
// transformers computes; the imported checkpoint must tokenize the sources into the same ids (language token
// first), give every token of a forced target its log-probability (within 1e-4), greedy-decode the same tokens with
// the target language forced (transformers' forced_bos_token_id), find beam hypotheses at least as probable, and
// print transformers' text through parla-translate --target-lang. Skipped without Python's transformers.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "decode/search.h"
#include "models/checkpoint.h"
#include "models/tensor_archive.h"
#include "support/files.h"
#include "support/hf_m2m100_fixture.h"
#include "support/python.h"
#include "support/run.h"
#include "support/temp_dir.h"
#include "text/special_ids.h"

using parla::testing::M2mFixture;
using parla::testing::make_m2m_fixture;
using parla::testing::parla_ids;
using parla::testing::TempDir;

namespace {

void check_m2m_against_transformers(const M2mFixture& f) {
  auto loaded = parla::models::load_seq2seq(f.checkpoint);
  auto src_vocab = parla::models::source_vocab(loaded.meta, f.checkpoint);
  auto& model = *loaded.model;
  CHECK(model.start_id() == parla::kEosId);
  const int64_t src_lang = src_vocab.piece_to_id(
      loaded.meta.languages["codes"][f.reference["src_lang"].get<std::string>()].get<std::string>());
  const int64_t tgt_lang = f.to_parla.at(f.reference["tgt_lang_id"].get<int64_t>());
  torch::NoGradGuard g;
  int cases = 0;
  for (const auto& c : f.reference["cases"]) {
    const std::string source = c["source"];
    INFO(source);
    // Tokenization: the language token, the pieces, </s>.
    std::vector<int64_t> src = {src_lang};
    for (int id : src_vocab.encode(source)) src.push_back(id);
    src.push_back(parla::kEosId);
    CHECK(src == parla_ids(f, c["src_ids"]));
    auto src_t = torch::tensor(src, torch::kLong).view({1, -1});

    // Forced target ([language] pieces </s>, decoded from </s>): every token's log-probability.
    auto tgt = parla_ids(f, c["tgt_ids"]);
    std::vector<int64_t> tgt_in = {model.start_id()};
    tgt_in.insert(tgt_in.end(), tgt.begin(), tgt.end() - 1);
    auto logp = torch::log_softmax(model.forward(src_t, torch::tensor(tgt_in).view({1, -1})).to(torch::kDouble), -1)[0];
    double worst = 0;
    for (size_t t = 0; t < tgt.size(); ++t)
      worst = std::max(worst, std::abs(logp[static_cast<int64_t>(t)][tgt[t]].item<double>() -
                                       c["forced_logprobs"][t].get<double>()));
    CHECK(worst < 1e-4);

    // Greedy with the language forced: transformers generates 20 new tokens (the language's included) and stops
    // without </s> at that limit; parla allows 20 tokens, then forces </s>.
    parla::decode::SearchOptions o;
    o.beam_size = 1;
    o.max_length_factor = 1e-9;
    o.max_length_offset = 20;
    o.length_penalty = 0;
    o.target_prefix = {tgt_lang};
    auto greedy = parla::decode::search(model, src_t, o)[0][0].tokens;
    auto theirs = parla_ids(f, c["greedy_ids"]);
    REQUIRE(!theirs.empty());
    CHECK(theirs.front() == parla::kEosId);  // the decoder start, which parla does not output
    theirs.erase(theirs.begin());
    if (!theirs.empty() && theirs.back() == parla::kEosId) theirs.pop_back();
    CHECK(greedy == theirs);

    // Beam 4 by log-probability: parla's best at least as probable as transformers' best (the forced language
    // token scored 0 on both sides), where transformers' ended with </s>. Each token's log-probability agrees
    // within 1e-4 (above), so a sum over n tokens within n x 1e-4 (parla sums in float).
    o.beam_size = 4;
    o.n_best = 4;
    auto beam = parla::decode::search(model, src_t, o)[0];
    REQUIRE(!beam.empty());
    CHECK(beam[0].tokens.front() == tgt_lang);
    for (const auto& h : c["beam"]) {
      const auto ids = parla_ids(f, h["ids"]);
      std::vector<int64_t> best = beam[0].tokens;
      best.push_back(parla::kEosId);
      INFO("the same hypothesis: " << (std::vector<int64_t>(ids.begin() + 1, ids.end()) == best) << ", parla "
                                   << std::setprecision(10) << beam[0].log_prob << ", transformers " << h["logprob"].get<double>());
      const double tolerance = 1e-4 * static_cast<double>(std::max(ids.size(), best.size()));
      if (ids.back() == parla::kEosId) CHECK(beam[0].log_prob >= h["logprob"].get<double>() - tolerance);
    }
    ++cases;
  }
  CHECK(cases == 6);

  // Text: parla-translate with the target language, line by line against transformers' decode.
  const auto& texts = f.reference["texts"];
  std::string input;
  for (const auto& t : texts) input += t["source"].get<std::string>() + "\n";
  const std::string in = f.dir + "/sources-parla.txt";
  std::ofstream(in) << input;
  for (const bool beam : {false, true}) {
    INFO((beam ? "beam 4" : "greedy"));
    std::vector<std::string> args = {"-q", "-m", f.checkpoint, "--threads", "1", "--length-penalty", "0",
                                     "--max-length-factor", "0.000001", "--max-length-offset", "20", "-i", in,
                                     "--source-lang", f.reference["src_lang"], "--target-lang", f.reference["tgt_lang"],
                                     "-b", beam ? "4" : "1"};
    auto r = parla::testing::run("parla-translate", args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto lines = parla::testing::split_lines(r.out);
    REQUIRE(lines.size() == texts.size());
    size_t equal = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string want = texts[i][beam ? "beam_text" : "greedy_text"];
      INFO("line " << i << ": " << texts[i]["source"].get<std::string>());
      if (!beam) CHECK(lines[i] == want);
      equal += lines[i] == want;
    }
    INFO(equal << " of " << lines.size() << " lines equal");
    CHECK(equal * 100 >= lines.size() * (beam ? 90 : 100));
  }
}

}  // namespace

TEST_CASE("an M2M-100 folder imports to a checkpoint that tokenizes, scores, searches and prints as transformers "
          "does, with the target language forced", "[python]") {
  TempDir tmp("hf-m2m100");
  auto f = make_m2m_fixture(tmp, "m2m100", 40);
  if (!f) return;
  check_m2m_against_transformers(*f);

  // What follows an import works on it: averaging (the mean of one checkpoint twice is itself: the same text),
  // int8, a shortlist built from its own translations (which then cannot change them).
  const std::string in = f->dir + "/sources-parla.txt";
  auto translate = [&](const std::string& model, std::vector<std::string> extra) {
    std::vector<std::string> args = {"-q", "-m", model, "--threads", "1", "-b", "2", "--target-lang", "de", "-i", in};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = parla::testing::run("parla-translate", args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return r.out;
  };
  const std::string plain = translate(f->checkpoint, {});
  const auto averaged = tmp.file("avg.pt"), int8 = tmp.file("int8.pt"), shortlist = tmp.file("shortlist.txt");
  REQUIRE(parla::testing::run("parla-train", {"-q", "average", "-o", averaged, f->checkpoint, f->checkpoint}).exit_code == 0);
  CHECK(translate(averaged, {}) == plain);
  REQUIRE(parla::testing::run("parla-train", {"-q", "quantize", "-o", int8, f->checkpoint}).exit_code == 0);
  CHECK(parla::testing::split_lines(translate(int8, {})).size() == f->reference["texts"].size());
  const std::string outputs = tmp.write("outputs.txt", plain);
  auto s = parla::testing::run("parla-shortlist", {"-q", "-m", f->checkpoint, "--source", in, "--target", outputs,
                                                    "-o", shortlist, "--best", "1000", "--frequent", "0"});
  INFO(s.err);
  REQUIRE(s.exit_code == 0);
  CHECK(parla::testing::split_lines(translate(f->checkpoint, {"--shortlist", shortlist})).size() ==
        f->reference["texts"].size());
}

TEST_CASE("an M2M-100 folder whose vocab_size the weights or the tokenizer files do not back is refused before "
          "a table of that size is made", "[python]") {
  TempDir tmp("hf-m2m100-bad");
  auto f = make_m2m_fixture(tmp, "m2m100", 0);
  if (!f) return;
  namespace fs = std::filesystem;
  auto damaged = [&](const std::string& name, const std::function<void(const std::string&)>& damage) {
    const std::string dir = tmp.file(name);
    fs::copy(f->dir, dir);
    damage(dir);
    return dir;
  };
  auto set_vocab_size = [](const std::string& dir, int64_t n) {
    std::ifstream in(dir + "/config.json");
    auto j = nlohmann::json::parse(in);
    j["vocab_size"] = n;
    std::ofstream(dir + "/config.json") << j.dump();
  };
  // Two billion ids claimed: refused on the embedding's shape, at once (a table of that size would take 64 GB).
  const auto huge = damaged("huge", [&](const std::string& dir) { set_vocab_size(dir, 2000000000); });
  auto r = parla::testing::run("parla-convert", {"hf", huge, "-o", tmp.file("huge.pt")});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("model.safetensors") && Catch::Contains("2000000000"));
  CHECK_FALSE(fs::exists(tmp.file("huge.pt")));
  // Weights that do have 5,000 more rows than the tokenizer files name: refused naming config.json.
  const auto unnamed = damaged("unnamed", [&](const std::string& dir) {
    auto a = parla::models::TensorArchive::load(dir + "/model.safetensors");
    torch::Tensor table;
    REQUIRE(a.try_read("model.shared.weight", table));
    auto bigger = torch::cat({table, torch::zeros({5000, table.size(1)})});
    a.write("model.shared.weight", bigger);
    a.save(dir + "/model.safetensors.new");
    fs::rename(dir + "/model.safetensors.new", dir + "/model.safetensors");
    set_vocab_size(dir, bigger.size(0));
  });
  r = parla::testing::run("parla-convert", {"hf", unnamed, "-o", tmp.file("unnamed.pt")});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("config.json") && Catch::Contains("name only"));
  CHECK_FALSE(fs::exists(tmp.file("unnamed.pt")));
}

TEST_CASE("an NLLB-200 folder (tokenizer.json, codes like deu_Latn) imports and computes as transformers does",
          "[python]") {
  TempDir tmp("hf-nllb");
  auto f = make_m2m_fixture(tmp, "nllb", 40);
  if (!f) return;
  check_m2m_against_transformers(*f);
}

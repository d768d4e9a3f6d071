// Importing Hugging Face MarianMT folders, against transformers itself: tests/convert/hf_marian_fixture.py builds a
// small MarianMT model with random weights locally and records what transformers computes with it; the parla
// checkpoint imported from the folder must tokenize the same sources into the same pieces, give the same
// log-probability to every token of a forced target (within 1e-4), the same greedy output token for token, and
// beam hypotheses whose scores are transformers' (or better). Skipped without Python's transformers.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <tuple>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "convert/hf_marian_import.h"
#include "convert/imported_model.h"
#include "core/error.h"
#include "decode/search.h"
#include "models/checkpoint.h"
#include "models/tensor_archive.h"
#include "support/files.h"
#include "support/python.h"
#include "support/run.h"
#include "support/temp_dir.h"
#include "text/special_ids.h"

using parla::testing::TempDir;
namespace fs = std::filesystem;

namespace {

struct Fixture {
  std::string dir;
  nlohmann::json reference;
};

// The folder and transformers' reference, or nothing (after the skip marker) without transformers.
std::optional<Fixture> make_fixture(const TempDir& tmp, const std::string& name, const std::vector<std::string>& flags) {
  const std::string python = parla::testing::python_with("transformers");
  if (python.empty()) return std::nullopt;
  Fixture f{tmp.file(name), {}};
  std::vector<std::string> args = {std::string(PARLA_SOURCE_DIR) + "/tests/convert/hf_marian_fixture.py", f.dir};
  args.insert(args.end(), flags.begin(), flags.end());
  auto r = parla::testing::run(python, args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(f.dir + "/reference.json");
  f.reference = nlohmann::json::parse(in);
  return f;
}

// Folder id -> parla id, from the two piece tables (the import's remapping, recomputed from its result).
std::map<int64_t, int64_t> id_map(const std::string& vocab_json, const std::vector<std::string>& parla_pieces) {
  std::ifstream in(vocab_json);
  auto v = nlohmann::json::parse(in);
  std::map<std::string, int64_t> parla;
  for (size_t i = 0; i < parla_pieces.size(); ++i) parla[parla_pieces[i]] = static_cast<int64_t>(i);
  std::map<int64_t, int64_t> out;
  for (auto it = v.begin(); it != v.end(); ++it) out[it.value().get<int64_t>()] = parla.at(it.key());
  return out;
}

std::vector<int64_t> mapped(const nlohmann::json& ids, std::map<int64_t, int64_t>& m) {
  std::vector<int64_t> out;
  for (const auto& i : ids) out.push_back(m.at(i.get<int64_t>()));
  return out;
}

void check_against_transformers(const Fixture& f, const std::string& checkpoint, bool separate) {
  auto loaded = parla::models::load_seq2seq(checkpoint);
  auto src_vocab = parla::models::source_vocab(loaded.meta, checkpoint);
  auto tgt_vocab = parla::models::target_vocab(loaded.meta, checkpoint);
  auto src_map = id_map(f.dir + "/vocab.json", loaded.meta.src_pieces);
  auto tgt_map = id_map(f.dir + (separate ? "/target_vocab.json" : "/vocab.json"), loaded.meta.tgt_pieces);
  auto& model = *loaded.model;
  CHECK(model.start_id() == parla::kPadId);
  torch::NoGradGuard g;
  int cases = 0;
  for (const auto& c : f.reference["cases"]) {
    const std::string source = c["source"];
    INFO(source);
    // Tokenization: the same pieces, language token included, then </s>.
    auto ids = src_vocab.encode(source);
    std::vector<int64_t> src(ids.begin(), ids.end());
    src.push_back(parla::kEosId);
    CHECK(src == mapped(c["src_ids"], src_map));
    auto src_t = torch::tensor(src, torch::kLong).view({1, -1});

    // Forced target: every token's log-probability.
    auto tgt = mapped(c["tgt_ids"], tgt_map);
    std::vector<int64_t> tgt_in = {model.start_id()};
    tgt_in.insert(tgt_in.end(), tgt.begin(), tgt.end() - 1);
    auto logp = torch::log_softmax(model.forward(src_t, torch::tensor(tgt_in, torch::kLong).view({1, -1})).to(torch::kDouble), -1)[0];
    double worst = 0;
    for (size_t t = 0; t < tgt.size(); ++t)
      worst = std::max(worst, std::abs(logp[static_cast<int64_t>(t)][tgt[t]].item<double>() -
                                       c["forced_logprobs"][t].get<double>()));
    CHECK(worst < 1e-4);

    // Greedy: transformers stops at 20 new tokens with </s> forced last, parla at 19 tokens plus </s>.
    parla::decode::SearchOptions o;
    o.beam_size = 1;
    o.max_length_factor = 1e-9;
    o.max_length_offset = 19;
    o.length_penalty = 0;
    auto greedy = parla::decode::search(model, src_t, o)[0][0].tokens;
    greedy.push_back(parla::kEosId);
    CHECK(greedy == mapped(c["greedy_ids"], tgt_map));

    // Beam 4 ranked by log-probability (length penalty 0 on both sides), compared on the log-probability of whole
    // sequences (transformers scores a </s> forced at its length limit as log 1; the fixture rescored its
    // hypotheses by a forced pass): parla's best is at least as probable as transformers' best, and equal when
    // they are the same sequence.
    o.beam_size = 4;
    o.n_best = 4;
    auto beam = parla::decode::search(model, src_t, o)[0];
    REQUIRE(!beam.empty());
    double hf_best = -1e30;
    std::vector<int64_t> hf_best_ids;
    for (const auto& h : c["beam"])
      if (h["logprob"].get<double>() > hf_best) {
        hf_best = h["logprob"].get<double>();
        hf_best_ids = mapped(h["ids"], tgt_map);
      }
    CHECK(beam[0].log_prob >= hf_best - 1e-4);
    auto best = beam[0].tokens;
    best.push_back(parla::kEosId);
    if (best == hf_best_ids) CHECK(std::abs(beam[0].log_prob - hf_best) < 1e-4);
    // Every hypothesis's score is the log-probability of its tokens.
    for (const auto& h : beam) {
      std::vector<int64_t> in = {model.start_id()};
      in.insert(in.end(), h.tokens.begin(), h.tokens.end());
      std::vector<int64_t> out = h.tokens;
      out.push_back(parla::kEosId);
      auto lp = torch::log_softmax(model.forward(src_t, torch::tensor(in, torch::kLong).view({1, -1})).to(torch::kDouble), -1)[0];
      double sum = 0;
      for (size_t t = 0; t < out.size(); ++t) sum += lp[static_cast<int64_t>(t)][out[t]].item<double>();
      CHECK(std::abs(sum - h.log_prob) < 1e-3);
    }
    // Text: the greedy output detokenizes as the folder's own SentencePiece model would.
    CHECK(tgt_vocab.decode(std::vector<int>(greedy.begin(), greedy.end())).find("<pad>") == std::string::npos);
    ++cases;
  }
  CHECK(cases == 6);
}

}  // namespace

TEST_CASE("a MarianMT folder (shared vocabulary, swish) imports to a checkpoint that computes what transformers "
          "computes, language tokens included, and its Marian .npz form imports to the same checkpoint", "[python]") {
  TempDir tmp("hf-marian");
  auto f = make_fixture(tmp, "shared", {"--marian", tmp.file("marian")});
  if (!f) return;
  const auto ckpt = tmp.file("shared.pt");
  auto r = parla::testing::run("parla-convert", {"hf", f->dir, "-o", ckpt});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  check_against_transformers(*f, ckpt, false);

  const auto from_marian = tmp.file("marian.pt");
  auto m = parla::testing::run("parla-convert", {"marian", tmp.file("marian"), "-o", from_marian});
  INFO(m.err);
  REQUIRE(m.exit_code == 0);
  const auto a = parla::models::TensorArchive::load(ckpt), b = parla::models::TensorArchive::load(from_marian);
  REQUIRE(a.tensor_names() == b.tensor_names());
  for (const auto& name : a.tensor_names()) {
    INFO(name);
    torch::Tensor x, y;
    REQUIRE(a.try_read(name, x));
    REQUIRE(b.try_read(name, y));
    CHECK(x.equal(y));
  }
  auto ma = parla::models::read_meta(ckpt), mb = parla::models::read_meta(from_marian);
  CHECK(ma.src_pieces == mb.src_pieces);
  CHECK(ma.tgt_pieces == mb.tgt_pieces);
  // The configs agree but for max_positions, which the MarianMT folder records (max_position_embeddings) and a
  // Marian model has not (its sinusoids are unlimited, as parla's).
  ma.config["model"].erase("max_positions");
  mb.config["model"].erase("max_positions");
  CHECK(ma.config == mb.config);
}

TEST_CASE("a MarianMT folder with separate source and target vocabularies (relu) imports as well", "[python]") {
  TempDir tmp("hf-marian-separate");
  auto f = make_fixture(tmp, "separate", {"--separate", "--activation", "relu", "--seed", "3"});
  if (!f) return;
  const auto ckpt = tmp.file("separate.pt");
  parla::convert::write_checkpoint(parla::convert::read_hf_marian(f->dir), f->dir, ckpt);
  auto meta = parla::models::read_meta(ckpt);
  CHECK(meta.src_pieces != meta.tgt_pieces);
  CHECK(meta.config["model"]["share_embeddings"] == false);
  check_against_transformers(*f, ckpt, true);
}

namespace {
// parla-translate's output for `sources` with `flags`, one entry per output line.
std::vector<std::string> translated_lines(const TempDir& tmp, const std::string& checkpoint,
                                          const std::vector<std::string>& sources, std::vector<std::string> flags) {
  std::string text;
  for (const auto& s : sources) text += s + "\n";
  std::vector<std::string> args = {"-q", "-m", checkpoint, "--threads", "1", "--length-penalty", "0",
                                   "--max-length-factor", "0.000001", "--max-length-offset", "19"};
  args.insert(args.end(), flags.begin(), flags.end());
  auto r = parla::testing::run("parla-translate", args, tmp.write("joint-sources.txt", text));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return parla::testing::split_lines(r.out);
}
}  // namespace

TEST_CASE("the real OPUS-MT layout (two different SentencePiece models, one joint vocabulary): parla prints "
          "transformers' text, greedy and beam, from the MarianMT folder and from its Marian .npz form", "[python]") {
  TempDir tmp("hf-marian-joint");
  // A model whose outputs do hold pieces that target.spm lacks (the fixture's weights are scaled for that).
  auto f = make_fixture(tmp, "joint", {"--joint", "--marian", tmp.file("marian"), "--texts", "50", "--d-model", "32",
                                       "--weight-std", "0.3", "--bias-std", "0.1", "--eos-boost", "0"});
  if (!f) return;
  const auto ckpt = tmp.file("joint.pt"), from_marian = tmp.file("joint-marian.pt");
  for (const auto& [kind, in, out] : {std::tuple<std::string, std::string, std::string>{"hf", f->dir, ckpt},
                                      {"marian", tmp.file("marian"), from_marian}}) {
    auto r = parla::testing::run("parla-convert", {kind, in, "-o", out});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  check_against_transformers(*f, ckpt, false);

  const auto& texts = f->reference["texts"];
  std::vector<std::string> sources;
  for (const auto& t : texts) sources.push_back(t["source"]);
  // The fixture is what it claims: the two SentencePiece models differ, and transformers' outputs hold pieces of
  // the joint vocabulary that target.spm lacks (each is a word parla used to drop).
  CHECK(parla::testing::read_file(f->dir + "/source.spm") != parla::testing::read_file(f->dir + "/target.spm"));
  int lacking = 0;
  for (const auto& t : texts) lacking += t["greedy_pieces_target_spm_lacks"].get<int>();
  INFO("pieces target.spm lacks in transformers' greedy outputs: " << lacking);
  CHECK(lacking >= 20);

  for (const auto& checkpoint : {ckpt, from_marian}) {
    INFO(checkpoint);
    // Greedy: the text, line by line.
    const auto greedy = translated_lines(tmp, checkpoint, sources, {"-b", "1"});
    REQUIRE(greedy.size() == texts.size());
    size_t equal = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      INFO("line " << i << ": " << sources[i]);
      CHECK(greedy[i] == texts[i]["greedy_text"].get<std::string>());
      equal += greedy[i] == texts[i]["greedy_text"].get<std::string>();
    }
    CHECK(equal == texts.size());
    // Beam 4, 4-best ('i ||| text ||| score', score = log-probability at length penalty 0): the best is at least
    // as probable as transformers' best.
    const auto nbest = translated_lines(tmp, checkpoint, sources, {"-b", "4", "-n", "4"});
    std::map<size_t, std::pair<std::string, double>> best;
    for (const auto& line : nbest) {
      const size_t a = line.find(" ||| "), b = line.rfind(" ||| ");
      REQUIRE(a != std::string::npos);
      REQUIRE(b > a);
      const size_t i = std::stoul(line.substr(0, a));
      if (!best.count(i)) best[i] = {line.substr(a + 5, b - a - 5), std::stod(line.substr(b + 5))};
    }
    REQUIRE(best.size() == texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      INFO("line " << i << ": " << sources[i]);
      const double theirs = texts[i]["beam_logprob"].get<double>();
      CHECK(best[i].second >= theirs - 1e-4);
    }
  }
}

TEST_CASE("a folder with only pytorch_model.bin (torch.save's zip: a state_dict or a plain dict) imports to the "
          "checkpoint its model.safetensors gives, and the legacy format and a pickle that would run code are refused",
          "[python]") {
  TempDir tmp("hf-marian-bin");
  auto f = make_fixture(tmp, "bin", {"--bin"});
  if (!f) return;
  const auto reference = tmp.file("reference.pt");
  parla::convert::write_checkpoint(parla::convert::read_hf_marian(f->dir), f->dir, reference);
  const auto ref = parla::models::TensorArchive::load(reference);
  // The folder as a Hub repository that carries only pytorch_model.bin, from one of the fixture's .bin files.
  auto folder_with = [&](const std::string& bin) {
    const std::string dir = tmp.file("with-" + bin);
    fs::create_directories(dir);
    for (const auto& e : fs::directory_iterator(f->dir))
      if (e.path().extension() != ".bin" && e.path().filename() != "model.safetensors")
        fs::copy_file(e.path(), fs::path(dir) / e.path().filename());
    fs::copy_file(fs::path(f->dir) / bin, fs::path(dir) / "pytorch_model.bin");
    return dir;
  };
  for (const std::string bin : {"pytorch_model.bin", "plain_dict.bin"}) {
    INFO(bin);
    const auto out = tmp.file(bin + ".pt");
    auto r = parla::testing::run("parla-convert", {"hf", folder_with(bin), "-o", out});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto got = parla::models::TensorArchive::load(out);
    REQUIRE(got.tensor_names() == ref.tensor_names());
    for (const auto& name : ref.tensor_names()) {
      INFO(name);
      torch::Tensor x, y;
      REQUIRE(ref.try_read(name, x));
      REQUIRE(got.try_read(name, y));
      CHECK(x.equal(y));
    }
    CHECK(parla::models::read_meta(out).tgt_pieces == parla::models::read_meta(reference).tgt_pieces);
  }
  struct Refused {
    std::string bin, says;
  };
  for (const auto& c : {Refused{"legacy.bin", "legacy format"}, Refused{"runs_code.bin", "posix.system"}}) {
    INFO(c.bin);
    const auto out = tmp.file(c.bin + ".pt");
    const auto dir = folder_with(c.bin);
    auto r = parla::testing::run("parla-convert", {"hf", dir, "-o", out});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(dir + "/pytorch_model.bin") && Catch::Contains(c.says));
    CHECK_FALSE(fs::exists(out));
  }
  // The legacy format's message gives the command that re-saves the folder.
  const auto legacy = parla::testing::run("parla-convert", {"hf", tmp.file("with-legacy.bin"), "-o", tmp.file("x.pt")});
  CHECK_THAT(legacy.err, Catch::Contains("save_pretrained(") && Catch::Contains("safe_serialization=True"));
  CHECK_FALSE(fs::exists(f->dir + "/code_ran"));  // nothing of the pickle ran
}

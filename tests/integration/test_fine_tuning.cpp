// Fine-tuning an imported model through the executables: parla-convert (a MarianMT folder written by hand) ->
// parla-preprocess --vocab-from -> parla-train --init-from -> parla-translate.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "data/token_dataset.h"
#include "models/checkpoint.h"
#include "support/files.h"
#include "support/marian_folder.h"
#include "support/hf_m2m100_fixture.h"
#include "support/run.h"
#include "support/temp_dir.h"

using Catch::Matchers::Contains;
using parla::testing::run;
using parla::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// Toy-language lines (the hand-written model's SentencePiece model was trained on these words); the target side
// is the source reversed, something for the model to learn.
std::vector<std::string> fine_tuning_lines(int n, int offset) {
  const auto& words = parla::testing::toy_words();
  std::vector<std::string> lines;
  for (int i = 0; i < n; ++i) {
    std::string line;
    for (int j = 0; j < 3 + (i + offset) % 5; ++j) {
      if (j) line += " ";
      line += words[static_cast<size_t>(((i + offset) * 7 + j * 5 + (i + offset) / 4) % 12)];
    }
    lines.push_back(line);
  }
  return lines;
}

std::string write_lines(const TempDir& dir, const std::string& name, const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  return dir.write(name, text);
}

std::vector<std::string> reversed_words(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const auto& l : lines) {
    std::istringstream in(l);
    std::vector<std::string> w{std::istream_iterator<std::string>(in), {}};
    std::string r;
    for (auto it = w.rbegin(); it != w.rend(); ++it) r += (r.empty() ? "" : " ") + *it;
    out.push_back(r);
  }
  return out;
}

struct Imported {
  std::string checkpoint, train_src, train_tgt, valid_src, valid_tgt;
  std::vector<std::string> valid_lines;
};

Imported import_and_write_corpus(const TempDir& dir) {
  Imported m;
  m.checkpoint = dir.file("imported.pt");
  auto c = run("parla-convert", {"-q", "hf", parla::testing::write_marian_folder(dir, "marian"), "-o", m.checkpoint});
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  const auto train = fine_tuning_lines(300, 0);
  m.valid_lines = fine_tuning_lines(20, 1000);
  m.train_src = write_lines(dir, "train.en", train);
  m.train_tgt = write_lines(dir, "train.de", reversed_words(train));
  m.valid_src = write_lines(dir, "valid.en", m.valid_lines);
  m.valid_tgt = write_lines(dir, "valid.de", reversed_words(m.valid_lines));
  return m;
}

std::vector<std::string> preprocess_args(const Imported& m, const std::string& out) {
  return {"-q", "--src-lang", "en", "--tgt-lang", "de", "--train-src", m.train_src, "--train-tgt", m.train_tgt,
          "--valid-prefix", fs::path(m.valid_src).replace_extension().string(), "--test-size", "0", "-o", out};
}

std::vector<std::string> train_args(const std::string& data, const std::string& save, const std::string& init,
                                    int steps = 3) {
  return {"-q", "--data", data, "-o", save, "--init-from", init, "--max-steps", std::to_string(steps),
          "--batch-tokens", "200", "--valid-every", "0", "--log-every", "1", "--set", "training.valid_bleu=false",
          "--set", "runtime.threads=1"};
}

// The loss of every logged update (metrics.jsonl's train records), in order.
std::vector<double> train_losses(const std::string& save_dir) {
  std::ifstream in(save_dir + "/metrics.jsonl");
  std::vector<double> out;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j["type"] == "train") out.push_back(j["loss"].get<double>());
  }
  return out;
}

// The means of the first and of the last n losses.
std::pair<double, double> first_and_last_means(const std::vector<double>& losses, size_t n) {
  double first = 0, last = 0;
  for (size_t i = 0; i < n; ++i) {
    first += losses[i] / static_cast<double>(n);
    last += losses[losses.size() - 1 - i] / static_cast<double>(n);
  }
  return {first, last};
}

}  // namespace

TEST_CASE("an imported model fine-tunes: its vocabularies encode the corpus and training starts from its weights") {
  TempDir dir("fine-tune");
  const auto m = import_and_write_corpus(dir);
  const auto imported = parla::models::read_meta(m.checkpoint);
  REQUIRE_FALSE(imported.src_pieces.empty());  // Marian's numbering: ids go through a piece table

  const auto data = dir.file("data");
  auto args = preprocess_args(m, data);
  args.insert(args.end(), {"--vocab-from", m.checkpoint});
  auto p = run("parla-preprocess", args);
  INFO(p.err);
  REQUIRE(p.exit_code == 0);

  // The dataset holds the checkpoint's vocabularies, and its ids are theirs: the validation split (kept in order)
  // against the imported model's own source vocabulary, line by line.
  const auto info = parla::data::read_dataset_info(data);
  CHECK(info.src_pieces == imported.src_pieces);
  CHECK(info.tgt_pieces == imported.tgt_pieces);
  CHECK(info.src_vocab_size == imported.src_vocab_size);
  CHECK(info.meta["vocab"]["from_checkpoint"] == fs::absolute(m.checkpoint).string());
  const auto vocab = parla::models::source_vocab(imported, m.checkpoint);
  const auto valid = parla::data::open_split(info, "valid");
  REQUIRE(valid.src.size() == m.valid_lines.size());
  for (size_t i = 0; i < m.valid_lines.size(); ++i) {
    std::vector<int64_t> expected;
    for (int id : vocab.encode(m.valid_lines[i])) expected.push_back(id);
    INFO(m.valid_lines[i]);
    CHECK(valid.src.get(i) == expected);
  }

  // Three updates at a learning rate of 1e-9 leave the weights where the checkpoint had them (a run that ignored
  // --init-from would start from random ones, far away), with its vocabularies and architecture.
  const auto save = dir.file("run");
  auto targs = train_args(data, save, m.checkpoint);
  targs.insert(targs.end(), {"--lr", "1e-9", "--set", "model.dropout=0.25"});
  auto t = run("parla-train", targs);
  INFO(t.err);
  REQUIRE(t.exit_code == 0);
  const auto tuned_path = save + "/checkpoint_last.pt";
  auto tuned = parla::models::load_seq2seq(tuned_path);
  auto original = parla::models::load_seq2seq(m.checkpoint);
  auto theirs = original.model->named_parameters();
  for (const auto& p : tuned.model->named_parameters()) {
    INFO(p.key());
    REQUIRE(theirs.contains(p.key()));
    CHECK((p.value() - theirs[p.key()]).abs().max().item<double>() < 1e-5);
  }
  CHECK(tuned.meta.src_pieces == imported.src_pieces);
  CHECK(tuned.meta.tgt_pieces == imported.tgt_pieces);
  CHECK(tuned.meta.src_spm == imported.src_spm);
  auto model_cfg = tuned.meta.config["model"];
  CHECK(model_cfg["dropout"] == 0.25);  // a training-only key of the run's own
  model_cfg["dropout"] = imported.config["model"]["dropout"];
  CHECK(model_cfg == imported.config["model"]);

  // It translates as the original does (same weights to 1e-5: the same greedy output).
  const auto input = dir.write("in.txt", m.valid_lines[0] + "\n" + m.valid_lines[1] + "\n");
  auto a = run("parla-translate", {"-q", "-m", m.checkpoint, "-b", "1"}, input);
  auto b = run("parla-translate", {"-q", "-m", tuned_path, "-b", "1"}, input);
  CHECK(a.exit_code == 0);
  CHECK(b.exit_code == 0);
  CHECK(a.out == b.out);

  // A real learning rate moves the model: the training loss falls over the run (means of the first and last five
  // updates, which see different batches).
  const auto save2 = dir.file("run2");
  auto learn = train_args(data, save2, m.checkpoint, 40);
  learn.insert(learn.end(), {"--lr", "3e-3", "--warmup-steps", "1", "--set", "training.schedule=constant"});
  auto l = run("parla-train", learn);
  INFO(l.err);
  REQUIRE(l.exit_code == 0);
  const auto losses = train_losses(save2);
  REQUIRE(losses.size() == 40);
  const auto [first, last] = first_and_last_means(losses, 5);
  CHECK(last < first - 0.5);
}

TEST_CASE("fine-tuning refuses a dataset with other vocabularies and an architecture key that differs") {
  TempDir dir("fine-tune-refusals");
  const auto m = import_and_write_corpus(dir);
  // A dataset with its own SentencePiece model: the checkpoint's embeddings mean other pieces.
  const auto own = dir.file("own");
  auto args = preprocess_args(m, own);
  args.insert(args.end(), {"--vocab-size", "40", "--set", "vocab.byte_fallback=false"});
  auto p = run("parla-preprocess", args);
  INFO(p.err);
  REQUIRE(p.exit_code == 0);
  auto t = run("parla-train", train_args(own, dir.file("run"), m.checkpoint));
  CHECK(t.exit_code != 0);
  CHECK_THAT(t.err, Contains("was not encoded with the checkpoint's vocabularies") && Contains("--vocab-from"));
  CHECK_FALSE(fs::exists(dir.file("run") + "/checkpoint_last.pt"));

  // The architecture is the checkpoint's: --dump-config shows it, and a size key of one's own is refused by name.
  auto dump = run("parla-train", {"--init-from", m.checkpoint, "--dump-config"});
  REQUIRE(dump.exit_code == 0);
  auto effective = nlohmann::json::parse(dump.out);
  CHECK(effective["model"]["d_model"] == 8);
  CHECK(effective["model"]["activation"] == "swish");
  auto bad = run("parla-train", {"--init-from", m.checkpoint, "--set", "model.d_model=16", "--dump-config"});
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.err, Contains("model.d_model") && Contains("16"));

  // An int8 checkpoint only translates.
  const auto int8 = dir.file("int8.pt");
  REQUIRE(run("parla-train", {"quantize", "-o", int8, m.checkpoint}).exit_code == 0);
  const auto data = dir.file("data");
  auto pargs = preprocess_args(m, data);
  pargs.insert(pargs.end(), {"--vocab-from", m.checkpoint});
  REQUIRE(run("parla-preprocess", pargs).exit_code == 0);
  auto q = run("parla-train", train_args(data, dir.file("run-int8"), int8));
  CHECK(q.exit_code != 0);
  CHECK_THAT(q.err, Contains("int8"));
}

namespace {

// The tokenizer's ids of a text in the checkpoint's numbering, without the final </s> (which the dataset leaves to
// the batches).
std::vector<int64_t> dataset_ids(const parla::testing::M2mFixture& f, const nlohmann::json& ids) {
  std::vector<int64_t> out;
  for (const auto& i : ids) out.push_back(f.to_parla.at(i.get<int64_t>()));
  REQUIRE(out.back() == 3);  // parla's </s>
  out.pop_back();
  return out;
}

}  // namespace

TEST_CASE("an imported M2M-100 or NLLB-200 model fine-tunes: each side starts with its language's token, as the "
          "model's tokenizer places it", "[python]") {
  for (const std::string kind : {"m2m100", "nllb"}) {
    DYNAMIC_SECTION(kind) {
      TempDir dir("fine-tune-" + kind);
      const auto fixture = parla::testing::make_m2m_fixture(dir, kind, 24);
      if (!fixture) return;
      const auto& f = *fixture;
      const auto imported = parla::models::read_meta(f.checkpoint);
      const std::string src_code = f.reference["src_lang"], tgt_code = f.reference["tgt_lang"];
      std::vector<std::string> sources, targets;
      for (const auto& t : f.reference["texts"]) {
        sources.push_back(t["source"]);
        targets.push_back(t["target"]);
      }
      // Training pairs of the same words (the fixture's SentencePiece model was trained on them), reversed.
      std::vector<std::string> train;
      for (int i = 0; i < 200; ++i) train.push_back(sources[static_cast<size_t>(i) % sources.size()]);
      const auto train_src = write_lines(dir, "train.en", train);
      const auto train_tgt = write_lines(dir, "train.de", reversed_words(train));
      const auto valid_src = write_lines(dir, "valid.en", sources);
      write_lines(dir, "valid.de", targets);
      std::vector<std::string> args = {"-q", "--src-lang", "en", "--tgt-lang", "de", "--train-src", train_src,
                                       "--train-tgt", train_tgt, "--valid-prefix",
                                       fs::path(valid_src).replace_extension().string(), "--test-size", "0",
                                       "--set", "data.clean.drop_duplicates=false", "--set", "data.clean.drop_identical=false",
                                       "--vocab-from", f.checkpoint};
      const auto data = dir.file("data");
      if (kind == "nllb") {
        // NLLB's codes are not the corpus's suffixes: the error names the flag and lists the model's codes.
        args.insert(args.end(), {"-o", data});
        auto p = run("parla-preprocess", args);
        CHECK(p.exit_code != 0);
        CHECK_THAT(p.err, Contains("vocab.src_lang_code") && Contains("--src-lang-code") && Contains("eng_Latn"));
        CHECK_FALSE(fs::exists(data));
        args.resize(args.size() - 2);
        args.insert(args.end(), {"--src-lang-code", src_code, "--tgt-lang-code", tgt_code});
      }
      args.insert(args.end(), {"-o", data});
      auto p = run("parla-preprocess", args);
      INFO(p.err);
      REQUIRE(p.exit_code == 0);

      // The dataset's ids are the tokenizer's: [source language] pieces and [target language] pieces (transformers'
      // input_ids and labels), the final </s> left to the batches.
      const auto info = parla::data::read_dataset_info(data);
      CHECK(info.control_pieces == imported.control_pieces);
      CHECK(info.languages["codes"] == imported.languages["codes"]);
      CHECK(info.languages["source"] == src_code);
      CHECK(info.languages["target"] == tgt_code);
      const auto valid = parla::data::open_split(info, "valid");
      REQUIRE(valid.src.size() == sources.size());
      for (size_t i = 0; i < sources.size(); ++i) {
        INFO(sources[i]);
        const auto& t = f.reference["texts"][i];
        CHECK(valid.src.get(i) == dataset_ids(f, t["src_ids"]));
        CHECK(valid.tgt.get(i) == dataset_ids(f, t["target_ids"]));
      }

      // Three updates at a learning rate of 1e-9, validating with BLEU (the target language forced): the checkpoint
      // keeps the model's control pieces and codes, and the dataset's pair becomes its default, so it translates
      // without language flags as the imported model does with them.
      const auto save = dir.file("run");
      const std::vector<std::string> targs = {"-q", "--data", data, "-o", save, "--init-from", f.checkpoint,
                                              "--max-steps", "3", "--batch-tokens", "200", "--valid-every", "3",
                                              "--log-every", "1", "--lr", "1e-9", "--set", "runtime.threads=1"};
      auto t = run("parla-train", targs);
      INFO(t.err);
      REQUIRE(t.exit_code == 0);
      const auto tuned_path = save + "/checkpoint_last.pt";
      const auto tuned = parla::models::read_meta(tuned_path);
      CHECK(tuned.control_pieces == imported.control_pieces);
      CHECK(tuned.languages["codes"] == imported.languages["codes"]);
      CHECK(tuned.languages["source"] == src_code);
      CHECK(tuned.languages["target"] == tgt_code);
      CHECK(tuned.config["model"] == imported.config["model"]);
      // Validation translated with the target language forced: a BLEU was recorded.
      CHECK(tuned.info["validation"].contains("bleu"));
      const auto input = dir.write("in.txt", sources[0] + "\n" + sources[1] + "\n" + sources[2] + "\n");
      auto a = run("parla-translate",
                   {"-q", "-m", f.checkpoint, "-b", "1", "--source-lang", src_code, "--target-lang", tgt_code}, input);
      auto b = run("parla-translate", {"-q", "-m", tuned_path, "-b", "1"}, input);
      CHECK(a.exit_code == 0);
      CHECK(b.exit_code == 0);
      CHECK(a.out == b.out);
      CHECK(parla::testing::split_lines(a.out).size() == 3);

      if (kind == "nllb") continue;  // the rest is the same code for both kinds

      // A real learning rate: the loss falls, and the model learns to reverse the words it was shown. The
      // validation's BLEU is parla-translate's (the dataset's languages now the checkpoint's defaults) scored by
      // parla-score-bleu.
      auto learn_and_score = [&](const std::string& dataset, const std::string& init, const std::string& out,
                                 int steps, const std::string& lr) {
        const std::vector<std::string> learn = {
            "-q", "--data", dataset, "-o", out, "--init-from", init, "--max-steps", std::to_string(steps),
            "--batch-tokens", "400", "--valid-every", std::to_string(steps), "--log-every", "1", "--lr", lr,
            "--warmup-steps", "1", "--set", "training.schedule=constant", "--set", "model.dropout=0",
            "--set", "runtime.threads=1"};
        auto l = run("parla-train", learn);
        INFO(l.err);
        REQUIRE(l.exit_code == 0);
        const auto meta = parla::models::read_meta(out + "/checkpoint_last.pt");
        REQUIRE(meta.config["training"]["valid_beam_size"] == 1);
        auto hyp = run("parla-translate", {"-q", "-m", out + "/checkpoint_last.pt", "-b", "1", "-i", valid_src});
        REQUIRE(hyp.exit_code == 0);
        auto bleu = run("parla-score-bleu", {"-b", "-w", "6", dir.file("valid.de"), "-i", dir.write("hyp.de", hyp.out)});
        REQUIRE(bleu.exit_code == 0);
        CHECK(std::stod(bleu.out) == Approx(meta.info["validation"]["bleu"].get<double>()).margin(1e-6));
        return std::stod(bleu.out);
      };
      const auto learned = dir.file("learned");
      const double bleu_de = learn_and_score(data, f.checkpoint, learned, 1000, "1e-2");
      const auto losses = train_losses(learned);
      REQUIRE(losses.size() == 1000);
      const auto [first, last] = first_and_last_means(losses, 20);
      CHECK(last < first - 1.0);
      CHECK(bleu_de > 5);

      // The same corpus as English-French: validation forces French's token (the learned model, left alone, starts
      // with German's), as parla-translate does with the new checkpoint's defaults; the scores show the difference.
      const auto data_fr = dir.file("data-fr");
      auto fr_args = args;
      fr_args.resize(fr_args.size() - 2);
      fr_args.insert(fr_args.end(), {"--tgt-lang-code", "fr", "-o", data_fr});
      auto pf = run("parla-preprocess", fr_args);
      INFO(pf.err);
      REQUIRE(pf.exit_code == 0);
      const double bleu_fr = learn_and_score(data_fr, learned + "/checkpoint_last.pt", dir.file("as-fr"), 3, "1e-9");
      CHECK(parla::models::read_meta(dir.file("as-fr") + "/checkpoint_last.pt").languages["target"] == "fr");
      CHECK(std::abs(bleu_fr - bleu_de) > 1);
    }
  }
}

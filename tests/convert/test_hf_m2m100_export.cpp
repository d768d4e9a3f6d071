// Exporting imported M2M-100 and NLLB-200 models back to Hugging Face (parla-convert to-hf), against transformers:
// the folder transformers' Auto classes load from the export must tokenize, score and translate as the folder
// transformers itself saved (tests/convert/hf_m2m100_fixture.py) and as parla-translate; imported again, it must
// translate byte for byte as before. Skipped without Python's transformers.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "models/checkpoint.h"
#include "support/files.h"
#include "support/hf_m2m100_fixture.h"
#include "support/python.h"
#include "support/run.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using parla::testing::TempDir;

TEST_CASE("an imported M2M-100 or NLLB-200 model exports to a Hugging Face folder that transformers loads with its "
          "tokenizer and that computes what the original computes", "[python]") {
  for (const std::string kind : {"m2m100", "nllb"}) {
    DYNAMIC_SECTION(kind) {
      TempDir dir("export-" + kind);
      const auto fixture = parla::testing::make_m2m_fixture(dir, kind, 30);
      if (!fixture) return;
      const auto& f = *fixture;
      const std::string python = parla::testing::python_with("transformers");
      const auto folder = dir.file("exported");
      auto e = parla::testing::run("parla-convert", {"to-hf", f.checkpoint, "-o", folder});
      INFO(e.err);
      REQUIRE(e.exit_code == 0);
      CHECK_THAT(e.err, Contains(kind == "nllb" ? "NLLB-200" : "M2M-100"));
      CHECK(fs::exists(folder + (kind == "nllb" ? "/tokenizer.json" : "/vocab.json")));

      const auto report_path = dir.file("check.json");
      auto c = parla::testing::run(python, {std::string(PARLA_SOURCE_DIR) + "/tests/convert/hf_m2m100_export_check.py",
                                            f.dir, folder, report_path});
      INFO(c.err);
      REQUIRE(c.exit_code == 0);
      std::ifstream in(report_path);
      const auto report = nlohmann::json::parse(in);
      CHECK(report["model_class"] == "M2M100ForConditionalGeneration");
      CHECK(report["tokenizer_class"] == (kind == "nllb" ? "NllbTokenizer" : "M2M100Tokenizer"));
      CHECK(report["src_lang"] == f.reference["src_lang"]);
      CHECK(report["tgt_lang"] == f.reference["tgt_lang"]);
      CHECK(report["len"] == report["original_len"]);
      CHECK(report["max_logit_difference"].get<double>() < 1e-5);  // the same weights in the same order
      if (kind == "nllb") CHECK(report["merges_equal"] == true);   // transformers' converter's merges, in its order

      // Every text: the same source ids, greedy tokens and printed text as the original folder gave, and the text
      // parla-translate prints.
      const auto& texts = f.reference["texts"];
      REQUIRE(report["texts"].size() == texts.size());
      const auto parla = parla::testing::run(
          "parla-translate", {"-q", "-m", f.checkpoint, "--threads", "1", "-b", "1", "--length-penalty", "0",
                              "--max-length-factor", "0.000001", "--max-length-offset", "20", "-i", f.dir + "/sources.txt"});
      REQUIRE(parla.exit_code == 0);
      const auto lines = parla::testing::split_lines(parla.out);
      REQUIRE(lines.size() == texts.size());
      for (size_t i = 0; i < texts.size(); ++i) {
        INFO(texts[i]["source"].get<std::string>());
        const auto& mine = report["texts"][i];
        CHECK(mine["src_ids"] == texts[i]["src_ids"]);
        CHECK(mine["greedy_ids"] == texts[i]["greedy_ids"]);
        CHECK(mine["greedy_text"] == texts[i]["greedy_text"]);
        CHECK(mine["greedy_text"] == lines[i]);
      }

      // Imported again: the same checkpoint contents, so byte-identical translations.
      const auto back = dir.file("back.pt");
      auto b = parla::testing::run("parla-convert", {"-q", "hf", folder, "-o", back});
      INFO(b.err);
      REQUIRE(b.exit_code == 0);
      const auto original = parla::models::read_meta(f.checkpoint), again = parla::models::read_meta(back);
      CHECK(again.src_pieces == original.src_pieces);
      CHECK(again.control_pieces == original.control_pieces);
      CHECK(again.languages == original.languages);
      for (const char* beam : {"1", "4"}) {
        auto x = parla::testing::run("parla-translate", {"-q", "-m", f.checkpoint, "-b", beam, "-i", f.dir + "/sources.txt"});
        auto y = parla::testing::run("parla-translate", {"-q", "-m", back, "-b", beam, "-i", f.dir + "/sources.txt"});
        CHECK(x.exit_code == 0);
        CHECK(x.out == y.out);
      }

      // An existing folder is refused and left alone; an int8 checkpoint is refused naming the float one.
      auto again_run = parla::testing::run("parla-convert", {"to-hf", f.checkpoint, "-o", folder});
      CHECK(again_run.exit_code == 2);
      CHECK_THAT(again_run.err, Contains("exists"));
      const auto int8 = dir.file("int8.pt");
      REQUIRE(parla::testing::run("parla-train", {"quantize", "-o", int8, f.checkpoint}).exit_code == 0);
      auto q = parla::testing::run("parla-convert", {"to-hf", int8, "-o", dir.file("int8-hf")});
      CHECK(q.exit_code != 0);
      CHECK_THAT(q.err, Contains("int8"));
      CHECK_FALSE(fs::exists(dir.file("int8-hf")));
      // Damaged checkpoints are refused naming the file: language codes whose tokens the vocabulary lacks (with no
      // control tokens at all), and control tokens that are no language.
      {
        auto loaded = parla::models::load_seq2seq(f.checkpoint);
        auto meta = loaded.meta;
        meta.languages["codes"] = {{"xx", "__xx__"}};
        meta.languages.erase("source");
        meta.languages.erase("target");
        parla::models::save_checkpoint(dir.file("damaged.pt"), *loaded.model, meta);
        meta.control_pieces.clear();
        parla::models::save_checkpoint(dir.file("no-controls.pt"), *loaded.model, meta);
      }
      auto no_controls = parla::testing::run("parla-convert", {"to-hf", dir.file("no-controls.pt"), "-o", dir.file("nc-hf")});
      CHECK(no_controls.exit_code == 1);
      CHECK_THAT(no_controls.err, Contains("no-controls.pt") && Contains("language codes"));
      CHECK_FALSE(fs::exists(dir.file("nc-hf")));
      auto damaged = parla::testing::run("parla-convert", {"to-hf", dir.file("damaged.pt"), "-o", dir.file("damaged-hf")});
      CHECK(damaged.exit_code == 1);
      CHECK_THAT(damaged.err, Contains("damaged.pt") && Contains("is neither a language nor <mask>"));
      CHECK_FALSE(fs::exists(dir.file("damaged-hf")));
    }
  }
}

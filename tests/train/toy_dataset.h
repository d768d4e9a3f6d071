#pragma once
// A tiny synthetic parla dataset for trainer tests, written with the library's TokenDatasetWriter: a copy task
// (target = source) over ids 4..V-1, sentences of 2-8 tokens. The SentencePiece model file is a placeholder:
// these tests train with training.valid_bleu = false, which never loads it (the trainer only stores its bytes).
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "data/token_dataset_writer.h"

namespace parla::test {

// repeat = true: each sentence is one token repeated (a masked token is predictable from its neighbours).
inline std::string toy_dataset(const std::string& name, int vocab = 24, int train = 400, int valid = 40,
                               uint32_t seed = 1, bool repeat = false) {
  namespace fs = std::filesystem;
  std::string dir = std::string(PARLA_TEST_TMP_DIR) + "/train/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> len(2, 8), tok(4, vocab - 1);
  auto write_split = [&](const std::string& split, int n) {
    data::TokenDatasetWriter src(dir + "/" + split + ".de", 2), tgt(dir + "/" + split + ".en", 2);
    std::ofstream ref(dir + "/" + split + ".en.txt");
    for (int i = 0; i < n; ++i) {
      std::vector<int> s(static_cast<size_t>(len(rng)));
      int first = tok(rng);
      for (auto& x : s) x = repeat ? first : tok(rng);
      src.add(s);
      tgt.add(s);
    }
    src.finish();
    tgt.finish();
  };
  write_split("train", train);
  write_split("valid", valid);
  std::ofstream(dir + "/spm.model") << "placeholder";
  nlohmann::json meta = {{"format", "parla-dataset"},
                         {"format_version", 1},
                         {"src_lang", "de"},
                         {"tgt_lang", "en"},
                         {"vocab",
                          {{"joint", true},
                           {"src_model", "spm.model"},
                           {"tgt_model", "spm.model"},
                           {"src_size", vocab},
                           {"tgt_size", vocab}}}};
  std::ofstream(dir + "/meta.json") << meta.dump(2);
  return dir;
}

// A tiny Transformer translation config on `data_dir`, saving to a fresh folder `save`.
inline Config toy_config(const std::string& data_dir, const std::string& save, const std::string& type = "transformer") {
  config::ConfigBuilder b;
  std::string save_dir = std::string(PARLA_TEST_TMP_DIR) + "/train/" + save;
  // The folder is emptied next: a save name equal to the dataset's would delete the data it trains on.
  if (std::filesystem::weakly_canonical(save_dir) == std::filesystem::weakly_canonical(data_dir))
    throw std::logic_error("toy_config: save folder '" + save + "' is the dataset's folder");
  std::filesystem::remove_all(save_dir);
  b.merge(nlohmann::json::parse(R"({
    "model": {"d_model": 32, "ffn_dim": 64, "heads": 2, "encoder_layers": 1, "decoder_layers": 1,
              "rnn_hidden": 32, "embed_dim": 32, "max_positions": 64},
    "training": {"lr": 0.003, "warmup_steps": 10, "batch_tokens": 256, "log_every": 1, "valid_every": 20,
                 "valid_bleu": false, "keep_last": 2},
    "runtime": {"threads": 1, "seed": 7}
  })"),
          "toy config");
  b.set("model.type", type, "test");
  b.set("data.dir", data_dir, "test");
  b.set("training.save_dir", save_dir, "test");
  return b.build();
}

}  // namespace parla::test

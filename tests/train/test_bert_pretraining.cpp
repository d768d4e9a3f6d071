#include <catch2/catch.hpp>

#include <chrono>
#include <set>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "data/token_dataset.h"
#include "models/bert.h"
#include "models/checkpoint.h"
#include "models/tensor_archive.h"
#include "toy_dataset.h"
#include "train/bert_pretraining.h"
#include "train/trainer.h"
#include "train/translation_task.h"

using parla::Config;
using parla::train::make_sentence_pairs;

TEST_CASE("next-sentence pairs are consecutive lines half of the time and random lines otherwise") {
  auto pairs = make_sentence_pairs(2000, 5);
  REQUIRE(pairs.size() == 2000);
  int next = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    CHECK(pairs[i].a == static_cast<int64_t>(i));
    if (pairs[i].is_next) {
      ++next;
      CHECK(pairs[i].b == pairs[i].a + 1);
    } else {
      CHECK(pairs[i].b != pairs[i].a + 1);
      CHECK(pairs[i].b >= 0);
      CHECK(pairs[i].b < 2000);
    }
  }
  CHECK_FALSE(pairs.back().is_next);  // the last line has no successor
  // Binomial(1999, 1/2): mean 999.5, sd 22.4; 5 sd either side.
  CHECK(next > 887);
  CHECK(next < 1112);
  auto again = make_sentence_pairs(2000, 5);
  for (size_t i = 0; i < pairs.size(); ++i) CHECK(again[i].b == pairs[i].b);
}

TEST_CASE("BERT pretraining runs and its masked-LM loss decreases") {
  auto data = parla::test::toy_dataset("bert", 16, 300, 40, 3, /*repeat=*/true);
  Config cfg = parla::test::toy_config(data, "bert-run", "bert");
  cfg.training.task = parla::TrainingTask::kBert;
  cfg.training.max_steps = 150;
  cfg.training.valid_every = 50;
  cfg.training.mlm_prob = 0.3;
  cfg.training.early_stop_metric = parla::ValidationMetric::kLoss;
  auto r = parla::train::Trainer(cfg, {}).run();
  REQUIRE(r.steps == 150);
  auto hist = parla::models::read_meta(cfg.training.save_dir + "/checkpoint_last.pt").info["valid_history"];
  REQUIRE(hist.size() == 3);
  // Each sentence repeats one token, so a masked token is its neighbour: the MLM perplexity must fall far below
  // the 12 ordinary tokens' uniform perplexity.
  CHECK(hist.back()["perplexity"].get<double>() < 3.0);
  CHECK(hist.back()["loss"].get<double>() < hist.front()["loss"].get<double>());
  CHECK(hist.back().contains("nsp_accuracy"));
}

TEST_CASE("a translation model's encoder initialised from a BERT checkpoint holds BERT's encoder weights") {
  auto data = parla::test::toy_dataset("bert-init", 16);
  Config bert_cfg = parla::test::toy_config(data, "bert-init-bert", "bert");
  bert_cfg.training.task = parla::TrainingTask::kBert;
  bert_cfg.training.max_steps = 3;
  parla::train::Trainer(bert_cfg, {}).run();
  std::string ckpt = bert_cfg.training.save_dir + "/checkpoint_last.pt";
  auto info = parla::data::read_dataset_info(data);
  auto bert = std::make_shared<parla::models::BertModel>(bert_cfg.model, info.src_vocab_size);
  parla::models::load_weights(ckpt, *bert);

  Config cfg = parla::test::toy_config(data, "bert-init-mt");
  parla::train::TranslationTask task(cfg, info);
  auto before = task.model()->named_parameters();
  task.init_encoder_from(ckpt);
  auto mt = task.model()->named_parameters();
  int compared = 0;
  for (const auto& p : bert->named_parameters()) {
    if (p.key().rfind("encoder.", 0) != 0) continue;
    auto* q = mt.find(p.key());
    REQUIRE(q != nullptr);
    CHECK(torch::equal(*q, p.value()));
    ++compared;
  }
  CHECK(compared > 0);

  // A BERT checkpoint whose config asks for 100,000 layers holds next to no weights for them: refused by the
  // file's budget with the layers' module overhead counted, in well under a second, not built for minutes.
  auto archive = parla::models::TensorArchive::load(ckpt);
  auto meta = nlohmann::json::parse(*archive.read_string("parla_meta"));
  meta["config"]["model"]["encoder_layers"] = 100000;
  archive.write("parla_meta", meta.dump());
  const std::string bad = bert_cfg.training.save_dir + "/deep.pt";
  archive.save(bad);
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(task.init_encoder_from(bad), Catch::Contains(bad) && Catch::Contains("layers' modules alone"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
}

// Checkpoints written before issue 35 (TorchScript archives, format 1) keep training: a run resumed from one, and
// from its `parla-train upgrade` copy, continues exactly as an uninterrupted run.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/config.h"
#include "formats/torchscript_archive.h"
#include "models/checkpoint.h"
#include "models/tensor_archive.h"
#include "support/legacy_checkpoint.h"
#include "support/run.h"
#include "metrics_records.h"
#include "toy_dataset.h"
#include "train/checkpoint_upgrade.h"
#include "train/trainer.h"

using parla::Config;
using parla::train::Trainer;
using parla::train::TrainerOptions;

namespace {

bool is_zip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return parla::formats::looks_like_zip(reinterpret_cast<const uint8_t*>(magic), 4);
}

// Trains `cfg` to `split` steps, replaces checkpoint_last.pt with `prepare(it)`, and resumes to `total`.
template <class Prepare>
std::vector<double> resumed(Config cfg, int split, int total, Prepare prepare) {
  cfg.training.max_steps = split;
  Trainer(cfg, {}).run();
  const std::string last = cfg.training.save_dir + "/checkpoint_last.pt";
  prepare(last);
  cfg.training.max_steps = total;
  TrainerOptions o;
  o.resume = last;
  Trainer(cfg, o).run();
  return parla::test::train_losses(cfg.training.save_dir);
}

}  // namespace

TEST_CASE("a run resumed from a checkpoint in the old TorchScript format, or from its upgraded copy, gives exactly "
          "the losses of an uninterrupted run") {
  auto data = parla::test::toy_dataset("legacy-resume");
  struct Variant {
    std::string name, type;
    double ema;
  };
  for (const auto& v : {Variant{"transformer", "transformer", 0.0}, Variant{"rnn-ema", "rnn", 0.9}}) {
    SECTION(v.name) {
      auto config = [&](const std::string& save) {
        Config c = parla::test::toy_config(data, "legacy-" + v.name + "-" + save, v.type);
        c.training.update_freq = 2;
        c.training.ema_decay = v.ema;
        return c;
      };
      Config full = config("full");
      full.training.max_steps = 30;
      Trainer(full, {}).run();
      const auto expected = parla::test::train_losses(full.training.save_dir);
      REQUIRE(expected.size() == 30);

      const auto via_legacy = resumed(config("legacy"), 13, 30, [](const std::string& last) {
        parla::testing::write_legacy_checkpoint(last, last + ".old");
        std::filesystem::rename(last + ".old", last);
        REQUIRE(is_zip(last));
      });
      CHECK(via_legacy == expected);

      const auto via_upgrade = resumed(config("upgraded"), 13, 30, [](const std::string& last) {
        parla::testing::write_legacy_checkpoint(last, last + ".old");
        CHECK(parla::train::upgrade_checkpoint(last + ".old", last) == 1);
        REQUIRE_FALSE(is_zip(last));
      });
      CHECK(via_upgrade == expected);
    }
  }
}

TEST_CASE("a BERT run resumed from an old-format checkpoint continues its masking exactly") {
  auto data = parla::test::toy_dataset("legacy-bert", 16, 200, 20, 3, /*repeat=*/true);
  auto config = [&](const std::string& save) {
    Config c = parla::test::toy_config(data, "legacy-bert-" + save, "bert");
    c.training.task = parla::TrainingTask::kBert;
    c.training.mlm_prob = 0.3;
    c.training.early_stop_metric = parla::ValidationMetric::kLoss;
    return c;
  };
  Config full = config("full");
  full.training.max_steps = 16;
  Trainer(full, {}).run();
  const auto via_legacy = resumed(config("legacy"), 7, 16, [](const std::string& last) {
    parla::testing::write_legacy_checkpoint(last, last + ".old");
    std::filesystem::rename(last + ".old", last);
  });
  CHECK(via_legacy == parla::test::train_losses(full.training.save_dir));
}

TEST_CASE("parla-train upgrade rewrites an old checkpoint as safetensors holding the same entries") {
  auto data = parla::test::toy_dataset("upgrade-cli-data");
  Config cfg = parla::test::toy_config(data, "upgrade-cli");
  cfg.training.max_steps = 4;
  Trainer(cfg, {}).run();
  const std::string last = cfg.training.save_dir + "/checkpoint_last.pt", old = last + ".old",
                    upgraded = cfg.training.save_dir + "/upgraded.pt";
  parla::testing::write_legacy_checkpoint(last, old);
  auto r = parla::testing::run("parla-train", {"upgrade", "-o", upgraded, old});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("format 1"));
  const auto original = parla::models::TensorArchive::load(last);
  const auto copy = parla::models::TensorArchive::load(upgraded);
  CHECK_FALSE(copy.legacy());
  CHECK(copy.tensor_names() == original.tensor_names());
  CHECK(copy.string_names() == original.string_names());
  for (const auto& name : original.tensor_names()) {
    INFO(name);
    torch::Tensor a, b;
    REQUIRE(original.try_read(name, a));
    REQUIRE(copy.try_read(name, b));
    CHECK(a.equal(b));
  }
  for (const auto& name : original.string_names()) {
    INFO(name);
    CHECK(*original.read_string(name) == *copy.read_string(name));
  }
  // A missing input is a data error naming it; a folder that does not exist for the output an I/O error.
  auto missing = parla::testing::run("parla-train", {"upgrade", "-o", upgraded, last + ".nope"});
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.err, Catch::Contains(last + ".nope"));
  auto unwritable = parla::testing::run("parla-train", {"upgrade", "-o", "/nonexistent-parla/x.pt", old});
  CHECK(unwritable.exit_code == 1);
  CHECK_THAT(unwritable.err, Catch::Contains("/nonexistent-parla/x.pt"));
}

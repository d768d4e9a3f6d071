// An int8 checkpoint (parla-train quantize) only translates: parla-train refuses to resume from it, average it or
// initialise an encoder from it, naming the file, with exit 1 and nothing written.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "train/quantize_checkpoint.h"
#include "core/config.h"
#include "models/checkpoint.h"
#include "models/int8_quantization.h"
#include "support/run.h"
#include "toy_dataset.h"
#include "train/trainer.h"

TEST_CASE("parla-train refuses an int8 checkpoint for --resume, average and --init-encoder-from, naming the file",
          "[int8]") {
  namespace fs = std::filesystem;
  auto data = parla::test::toy_dataset("int8-refusals-data");
  parla::Config cfg = parla::test::toy_config(data, "int8-refusals");
  cfg.training.max_steps = 3;
  REQUIRE(parla::train::Trainer(cfg, {}).run().steps == 3);
  const std::string dir = cfg.training.save_dir, last = dir + "/checkpoint_last.pt", int8 = dir + "/int8.pt";
  parla::train::quantize_checkpoint(last, int8);
  const std::string config_file = dir + "-config.json";
  std::ofstream(config_file) << parla::config::to_json(cfg).dump(2);
  const auto last_time = fs::last_write_time(last);

  auto resume = parla::testing::run("parla-train", {"-c", config_file, "--resume", int8});
  INFO(resume.err);
  CHECK(resume.exit_code == 1);
  CHECK(resume.err.find(int8) != std::string::npos);
  CHECK(resume.err.find("int8 checkpoint") != std::string::npos);
  CHECK(fs::last_write_time(last) == last_time);

  auto average = parla::testing::run("parla-train", {"average", "-o", dir + "/avg.pt", last, int8});
  INFO(average.err);
  CHECK(average.exit_code == 1);
  CHECK(average.err.find(int8) != std::string::npos);
  CHECK(!fs::exists(dir + "/avg.pt"));

  auto init = parla::testing::run("parla-train", {"-c", config_file, "--overwrite", "--init-encoder-from", int8,
                                                  "--save-dir", dir + "-init"});
  INFO(init.err);
  CHECK(init.exit_code == 1);
  CHECK(init.err.find(int8) != std::string::npos);
  CHECK(!fs::exists(dir + "-init/checkpoint_last.pt"));
}

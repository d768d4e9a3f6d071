#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <torch/torch.h>

#include "core/error.h"
#include "data/batch.h"
#include "data/batch_sampler.h"
#include "data/token_dataset.h"
#include "toy_dataset.h"
#include "train/batch_dump.h"
#include "train/trainer.h"
#include "train/translation_task.h"

namespace {

std::vector<int64_t> ids_of(const torch::Tensor& t) {
  auto c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

}  // namespace

TEST_CASE("training.dump_batches writes the batches trained on, which read back as the collated plan, padded to "
          "data.pad_to_multiple") {
  const int multiple = GENERATE(0, 8);  // 0: exact lengths on the CPU
  INFO("data.pad_to_multiple " << multiple);
  auto data = parla::test::toy_dataset("dump-data");
  parla::Config cfg = parla::test::toy_config(data, "dump-" + std::to_string(multiple));
  cfg.data.pad_to_multiple = multiple;
  cfg.training.max_steps = 6;
  cfg.training.update_freq = 2;
  cfg.training.valid_every = 0;
  const std::string path = cfg.training.save_dir + "-batches.bin";
  std::filesystem::remove(path);
  cfg.training.dump_batches = path;
  parla::train::Trainer(cfg, {}).run();
  CHECK(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));

  // The reference: the first 12 batches of epoch 1's plan, collated by the data layer.
  auto info = parla::data::read_dataset_info(data);
  auto split = parla::data::open_split(info, "train");
  const int64_t m = std::max(1, multiple);
  auto table = parla::data::padded_lengths(
      parla::data::filter_by_length(parla::train::sentence_lengths(split.src),
                                    parla::train::sentence_lengths(split.tgt),
                                    std::min<int64_t>(cfg.training.max_len, cfg.model.max_positions)),
      m);
  auto plan = parla::data::plan_epoch(table, cfg.training.batch_tokens, static_cast<uint64_t>(cfg.runtime.seed), 1);
  auto dumped = parla::train::read_batch_dump(path);
  REQUIRE(dumped.size() == 12);
  for (size_t i = 0; i < dumped.size(); ++i) {
    INFO("batch " << i);
    auto b = parla::data::collate_parallel(split, plan[i], parla::kBosId, m);
    CHECK(dumped[i].src_len % m == 0);
    CHECK(dumped[i].tgt_len % m == 0);
    CHECK(dumped[i].batch == b.src.size(0));
    CHECK(dumped[i].src_len == b.src.size(1));
    CHECK(dumped[i].tgt_len == b.tgt_out.size(1));
    CHECK(dumped[i].src == ids_of(b.src));
    CHECK(dumped[i].tgt_in == ids_of(b.tgt_in));
    CHECK(dumped[i].tgt_out == ids_of(b.tgt_out));
  }
}

TEST_CASE("a truncated batch dump or another file is a data error naming the file") {
  const std::string dir = std::string(PARLA_TEST_TMP_DIR) + "/train";
  std::filesystem::create_directories(dir);
  const std::string other = dir + "/not-a-dump.bin";
  std::ofstream(other) << "hello world, no magic here";
  CHECK_THROWS_WITH(parla::train::read_batch_dump(other), Catch::Contains("not-a-dump.bin"));

  const std::string cut = dir + "/cut-dump.bin";
  {
    std::ofstream out(cut, std::ios::binary);
    out.write("PRLBAT01", 8);
    const int64_t dims[3] = {2, 3, 1};
    out.write(reinterpret_cast<const char*>(dims), sizeof dims);
    const int64_t some[4] = {5, 6, 7, 8};  // 6 src ids expected, 4 present
    out.write(reinterpret_cast<const char*>(some), sizeof some);
  }
  CHECK_THROWS_AS(parla::train::read_batch_dump(cut), parla::DataError);
}

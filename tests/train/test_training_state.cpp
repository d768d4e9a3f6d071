// TrainingState: the JSON bookkeeping and the default generators' states that make a resumed run exact.
#include <catch2/catch.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "core/error.h"
#include "runtime/torch_compat.h"
#include "support/archives.h"
#include "support/cuda.h"
#include "train/training_state.h"

using parla::train::GeneratorStates;
using parla::train::TrainingState;

namespace {

// Writes `state` for `device` to a file and opens it again, as a checkpoint round trip does.
parla::models::TensorArchive round_trip(const TrainingState& state, const c10::Device& device) {
  parla::models::TensorArchive out;
  state.save(out, device);
  return parla::testing::reread(out);
}

}  // namespace

TEST_CASE("training state: the step counters and the CPU generator come back, and a CPU run writes no CUDA state") {
  TrainingState s;
  s.step = 17;
  s.epoch = 2;
  s.batch_in_epoch = 5;
  s.valid_history.push_back({{"loss", 1.5}});
  torch::manual_seed(11);
  torch::rand({3});  // move the generator away from its seed
  auto in = round_trip(s, torch::kCPU);
  // Reference: the draws that follow the saved state, taken before anything else draws.
  auto expected = torch::rand({5});
  torch::rand({7});  // the run goes on; loading must rewind to the saved point
  TrainingState back;
  back.load(in, "state.pt", torch::kCPU);
  CHECK(back.step == 17);
  CHECK(back.epoch == 2);
  CHECK(back.batch_in_epoch == 5);
  CHECK(back.valid_history == s.valid_history);
  CHECK(torch::equal(torch::rand({5}), expected));
  CHECK_FALSE(in.contains("torch_cuda_rng"));
}

TEST_CASE("training state: an archive without it is a DataError naming the file") {
  parla::models::TensorArchive empty;
  TrainingState s;
  CHECK_THROWS_AS(s.load(empty, "model-only.pt", torch::kCPU), parla::DataError);
  CHECK_THROWS_WITH(s.load(empty, "model-only.pt", torch::kCPU), Catch::Contains("model-only.pt"));
}

TEST_CASE("generator states: restoring rewinds the CPU generator to the captured point") {
  torch::manual_seed(3);
  auto saved = GeneratorStates::capture(torch::kCPU);
  CHECK_FALSE(saved.cuda.defined());
  auto expected = torch::randn({4});
  saved.restore(torch::kCPU);
  CHECK(torch::equal(torch::randn({4}), expected));
}

TEST_CASE("training state on a GPU saves and restores the CUDA generator, and resumes without it", "[cuda]") {
  PARLA_REQUIRE_CUDA();
  const torch::Device gpu(torch::kCUDA, 0);
  torch::manual_seed(5);
  TrainingState s;
  s.step = 3;
  auto in = round_trip(s, gpu);
  auto expected = torch::rand({6}, torch::TensorOptions().device(gpu)).cpu();  // dropout on a GPU draws here
  torch::rand({9}, torch::TensorOptions().device(gpu));
  TrainingState back;
  back.load(in, "gpu.pt", gpu);
  CHECK(torch::equal(torch::rand({6}, torch::TensorOptions().device(gpu)).cpu(), expected));

  // A checkpoint written on a CPU has no CUDA state: resuming on a GPU warns and goes on.
  auto cpu_written = round_trip(s, torch::kCPU);
  CHECK_NOTHROW(back.load(cpu_written, "cpu.pt", gpu));
  CHECK(back.step == 3);
}

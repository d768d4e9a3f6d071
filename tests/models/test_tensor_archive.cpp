// TensorArchive::release: a tensor read from a safetensors checkpoint is a view of the mapped file; once copied,
// its pages leave the process (so that loading holds one tensor of the file at a time), and reading it again
// gives the same values.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "models/tensor_archive.h"
#include "support/resident_memory.h"
#include "support/temp_dir.h"

using parla::models::TensorArchive;

TEST_CASE("a released tensor leaves memory and reads the same values again, and unknown names are ignored") {
  parla::testing::TempDir dir("tensor-archive");
  torch::manual_seed(3);
  const auto big = torch::randn({1024, 1024});  // 4 MiB
  const auto small = torch::arange(10, torch::kFloat);
  TensorArchive out;
  out.write("model.big", big);
  out.write("model.small", small);
  const auto path = dir.file("a.safetensors");
  out.save(path);

  const auto archive = TensorArchive::load(path);
  torch::Tensor read;
  REQUIRE(archive.try_read("model.big", read));
  const auto copy = read.clone();  // touches every page of the tensor
  CHECK(torch::equal(copy, big));
  const long before = parla::testing::resident_kb(read.data_ptr());
  REQUIRE(before >= 4096);
  archive.release("model.big");
  archive.release("model.nothing");
  CHECK(parla::testing::resident_kb(read.data_ptr()) <= before - 4000);
  CHECK(torch::equal(read, big));  // mapped in again from the file
  torch::Tensor s;
  REQUIRE(archive.try_read("model.small", s));
  CHECK(torch::equal(s, small));
}

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

TEST_CASE("a loaded archive lists, reads and saves its tensors in name order, written ones taking precedence") {
  parla::testing::TempDir dir("tensor-archive-names");
  TensorArchive out;
  out.write("b.x", torch::arange(3, torch::kFloat));
  out.write("a.y", torch::arange(4, torch::kLong));
  out.write("b.a", torch::ones({2, 2}, torch::kHalf));
  out.write("c", torch::zeros({0}));
  out.write("meta", std::string("text"));
  const auto path = dir.file("a.safetensors");
  out.save(path);

  auto archive = TensorArchive::load(path);
  CHECK(archive.tensor_names() == std::vector<std::string>{"a.y", "b.a", "b.x", "c"});
  CHECK(archive.tensor_names("b.") == std::vector<std::string>{"b.a", "b.x"});
  CHECK(archive.tensor_names("d").empty());
  CHECK(archive.contains("b.x"));
  CHECK(archive.contains("meta"));
  CHECK_FALSE(archive.contains("b"));
  CHECK(archive.tensor_bytes() == 3 * 4 + 4 * 8 + 4 * 2);
  torch::Tensor t;
  REQUIRE(archive.try_read("a.y", t));
  CHECK(t.scalar_type() == torch::kLong);
  CHECK(torch::equal(t, torch::arange(4, torch::kLong)));
  REQUIRE(archive.try_read("b.a", t));
  CHECK(torch::equal(t, torch::ones({2, 2}, torch::kHalf)));
  CHECK_FALSE(archive.try_read("meta", t));

  // Written after loading: a new name joins the list in order, a loaded name is replaced.
  archive.write("b.b", torch::full({1}, 7.0));
  archive.write("b.x", torch::full({2}, 9.0));
  CHECK(archive.tensor_names("b.") == std::vector<std::string>{"b.a", "b.b", "b.x"});
  REQUIRE(archive.try_read("b.x", t));
  CHECK(torch::equal(t, torch::full({2}, 9.0)));
  // Saved again: the loaded tensors go with the written ones.
  const auto again = dir.file("b.safetensors");
  archive.save(again);
  const auto reread = TensorArchive::load(again);
  CHECK(reread.tensor_names() == std::vector<std::string>{"a.y", "b.a", "b.b", "b.x", "c"});
  REQUIRE(reread.try_read("a.y", t));
  CHECK(torch::equal(t, torch::arange(4, torch::kLong)));
  REQUIRE(reread.try_read("b.x", t));
  CHECK(torch::equal(t, torch::full({2}, 9.0)));
  CHECK(*reread.read_string("meta") == "text");
}

#pragma once
// An archive written and read back through bytes in memory, as a checkpoint round trip does.
#include <sstream>

#include <torch/serialize/archive.h>

namespace parla::testing {

inline torch::serialize::InputArchive reread(torch::serialize::OutputArchive& out) {
  std::stringstream bytes;
  out.save_to(bytes);
  torch::serialize::InputArchive in;
  in.load_from(bytes);
  return in;
}

}  // namespace parla::testing

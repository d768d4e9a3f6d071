#pragma once
// An archive written to a checkpoint file and read back, as a checkpoint round trip does.
#include <string>

#include "models/tensor_archive.h"
#include "support/temp_dir.h"

namespace parla::testing {

inline models::TensorArchive reread(const models::TensorArchive& out,
                                    const torch::Device& map_location = torch::kCPU) {
  TempDir dir("archive");
  out.save(dir.file("archive.pt"));
  return models::TensorArchive::load(dir.file("archive.pt"), map_location);  // the loaded tensors own or map
}

}  // namespace parla::testing

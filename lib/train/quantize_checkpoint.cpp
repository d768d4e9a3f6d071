#include "train/quantize_checkpoint.h"

#include <torch/torch.h>

#include "models/checkpoint.h"
#include "models/int8_quantization.h"

namespace parla::train {

void quantize_checkpoint(const std::string& in, const std::string& out) {
  auto loaded = models::load_seq2seq(in, torch::kCPU);
  models::require_float_checkpoint(loaded.meta, in, "quantization");
  models::quantize_int8(*loaded.model);
  auto meta = loaded.meta;
  meta.info["quantized_from"] = in;
  models::save_checkpoint(out, *loaded.model, meta);
}

}  // namespace parla::train

#pragma once
// parla-train quantize: a float translation checkpoint written again with int8 weights (models/int8_quantization.h),
// for decoding on the CPU.
#include <string>

namespace parla::train {

// Reads the float checkpoint `in`, quantizes it and writes an int8 checkpoint to `out` (atomically; the config
// and SentencePiece models are carried over, info.quantized_from names `in`). DataError naming `in` when it is
// not a translation checkpoint or is int8 already.
void quantize_checkpoint(const std::string& in, const std::string& out);

}  // namespace parla::train

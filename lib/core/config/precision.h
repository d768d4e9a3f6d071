#pragma once
// The number format of a model's arithmetic (decoding.precision, training.precision): the one place its names are
// spelt. runtime/runtime_device.h maps it to a tensor type and says where each is supported.
#include "core/config/choice.h"

namespace parla {

enum class Precision { kFp32, kBf16, kFp16, kInt8 };

}  // namespace parla

PARLA_CHOICES(parla::Precision, {parla::Precision::kFp32, "fp32"}, {parla::Precision::kBf16, "bf16"},
              {parla::Precision::kFp16, "fp16"}, {parla::Precision::kInt8, "int8"});

#pragma once
// A model prepared the ways it decodes on a CPU, for tests that compare them: "fp32" (as built), "packed" (the
// packed fp32 products, forced at any thread count) or "int8".
#include <string>

#include "models/int8_quantization.h"
#include "models/packed_fp32.h"
#include "models/seq2seq.h"
#include "support/scoped_runtime.h"

namespace parla::testing {

// pack_fp32 whatever this thread's LibTorch thread count (on CPUs where packing is possible at all).
inline void pack_fp32_forced(models::Seq2SeqModel& model) {
  ScopedRuntime on([](RuntimeConfig& rc) { rc.packed_fp32 = PackedFp32::kOn; });
  models::pack_fp32(model);
}

inline void prepare_for_decoding(models::Seq2SeqModel& model, const std::string& kind) {
  if (kind == "packed") pack_fp32_forced(model);
  if (kind == "int8") models::quantize_int8(model);
}

}  // namespace parla::testing

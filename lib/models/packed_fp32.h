#pragma once
// A translation model prepared for fp32 decoding on a CPU with AVX-512: the weight of every fully connected layer
// and the output projection packed once (nn/packed_matrix.h), so that a decoder step streams each weight instead
// of LibTorch's BLAS repacking it on every call (issue 37: at beam 5, batch 1, the repacking took half the time
// of a translation). The float weights of the layers are released (the embedding table stays for its lookups).
#include "models/seq2seq.h"

namespace parla::models {

// Packs `model` (on the CPU, in fp32) in place and returns true, or leaves it and returns false when
// nn::packed_fp32_wanted() says no for this thread's LibTorch thread count (runtime::apply sets it before a model
// is loaded). Idempotent; never for training (the float weights are gone).
bool pack_fp32(Seq2SeqModel& model);

}  // namespace parla::models

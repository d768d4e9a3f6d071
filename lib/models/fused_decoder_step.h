#pragma once
// The Transformer decoder's incremental step (Vaswani et al. 2017, Sec. 3.1: masked self-attention over the cache,
// cross-attention, feed-forward, each with its residual and layer norm) on the CPU as one pass over a few
// preallocated buffers, instead of the modules' ~20 LibTorch operators per layer, each creating its tensors.
// At a decoder step of a small model (d 256, beam 5, batch 1: five rows) the arithmetic is a few hundred
// microseconds, and dispatch, allocation and freeing of those tensors cost as much again (perf, issue 37: 31% of an
// int8 translation in libtorch_cpu, 11% in malloc/free). This is what CTranslate2 and Marian do on the CPU.
//
// The same kernels compute the same numbers: the int8 and packed fp32 products over raw buffers
// (nn/int8_matrix.h, nn/packed_matrix.h; float weights through ATen's addmm_out, which is what torch::linear
// calls), the single-query attention kernels of nn/single_query_attention.h, ATen's own layer-norm kernel written
// into the buffers, the residual sums in the modules' order. So a fused step gives the module path's bits, and the
// batch-invariance of decoding is kept.
#include <torch/types.h>

namespace parla::models {

class TransformerDecoderImpl;
struct TransformerDecoderCache;

// Whether every layer of `decoder` can be fused: full self-attention (the key/value cache; the other variants keep
// their own state), activation ReLU, GELU or swish, and fully connected layers in int8 (where the CPU multiplies
// in int8), packed fp32 or float.
bool fused_step_supported(const TransformerDecoderImpl& decoder);

// Whether a step of x [N, 1, D] can take the fused path: fused_step_supported, float on the CPU, evaluation mode,
// no gradient recorded, no CPU autocast.
bool fused_step_applies(const TransformerDecoderImpl& decoder, const torch::Tensor& x);

// TransformerDecoderImpl::step without cross-attention weights, fused: x [N, 1, D] -> [N, 1, D], the cache advanced
// by one position. Its buffers live in cache.workspace.
torch::Tensor fused_decoder_step(TransformerDecoderImpl& decoder, const torch::Tensor& x,
                                 TransformerDecoderCache& cache, const torch::Tensor& memory_valid);

}  // namespace parla::models

#pragma once
// The int8 matrix product under dynamic quantization (Jacob et al. 2018; Marian's intgemm and CTranslate2 decode
// this way): weights quantized once per output channel, activations per row at run time, products summed exactly
// in int32 and scaled back to float. Free of LibTorch: raw row-major buffers in, the product from oneDNN (or, for a
// few rows on AVX-512 VNNI, from kernels/int8_vnni_rows.h over oneDNN's packed weights).
//
// Why activations are stored as uint8 with an offset: the x86 int8 instructions multiply unsigned by signed bytes.
// With VNNI (vpdpbusd) the four products of a lane are summed straight into int32, so activations use the full
// [-127, 127] range shifted by 128. Without VNNI (AVX2's vpmaddubsw) pairs of products are summed in int16 first,
// which saturates beyond 32767; activations are then quantized to [-63, 63] shifted by 64, so that a pair is at
// most 2 * 127 * 127 = 32258 and the int32 sum stays exact. Either way the offset is removed afterwards with the
// weights' column sums, so the result is exact integer arithmetic: it does not depend on how rows are batched.
#include <cstdint>
#include <memory>
#include <string>

namespace parla::kernels::int8 {

// How activations are quantized on this CPU (the instruction set oneDNN dispatches to, which
// ONEDNN_MAX_CPU_ISA=AVX2 can lower to measure the AVX2 path on any machine).
struct ActivationCode {
  int levels;      // |q| <= levels
  int offset;      // stored as uint8 q + offset
  std::string isa; // oneDNN's effective instruction set, e.g. "avx512_core_vnni", "avx2"
  bool vnni;
};
const ActivationCode& activation_code();

// False on CPUs without AVX2, where an int8 product would be slower than fp32 (int8 then runs as fp32 on the
// dequantized weights).
bool int8_pays();

// Per row r of x [rows, cols]: scale[r] = max_j |x[r, j]| / levels (1 for an all-zero row), and
// q[r, j] = round(x[r, j] / scale[r]) + offset.
void quantize_activations(const float* x, int64_t rows, int64_t cols, const ActivationCode& code, uint8_t* q,
                          float* scale);

// b [n, k] (int8, row-major: one row per output channel) reordered once into the blocked layout oneDNN's kernel
// reads on this CPU, so that no product repacks it (at one row per product, repacking cost more than the product).
class PackedWeights;
std::shared_ptr<const PackedWeights> pack_weights(const int8_t* b, int64_t n, int64_t k);

// Whether products of a few rows read b through the panel kernel (kernels/int8_vnni_rows.h) on this CPU.
bool has_panels(const PackedWeights& b);

// Row `row` of the b [n, k] given to pack_weights, read back out of the panels into out [k] (the same bytes): where
// b has panels its plain copy need not be kept (an embedding looks its rows up here). Only where has_panels(b).
void unpack_row(const PackedWeights& b, int64_t row, int8_t* out);

// acc [m, n] = a [m, k] (uint8, row-major) times b^T: up to 32 rows (64 for weights of at most 4 MiB) on the panel
// kernel where b has panels, else oneDNN's product (the same integers either way).
void gemm_u8s8s32(int64_t m, const uint8_t* a, const PackedWeights& b, int32_t* acc);
// Whether gemm_u8s8s32 multiplies m rows by b on the panel kernel (few rows, b has panels, runtime.int8_panels)
// rather than with oneDNN.
bool on_panels(int64_t m, const PackedWeights& b);

// In place, over a buffer of m * n 4-byte values that holds int32 acc[r, c] and receives float
// y[r, c] = (acc[r, c] - offset * column_sum[c]) * row_scale[r] * column_scale[c] + bias[c] (bias may be null):
// the product's output needs no second buffer.
void dequantize(void* buffer, int64_t m, int64_t n, int offset, const int32_t* column_sum, const float* row_scale,
                const float* column_scale, const float* bias);

}  // namespace parla::kernels::int8

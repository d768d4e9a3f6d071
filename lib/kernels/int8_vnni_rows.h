#pragma once
// The int8 product of a few rows (a decoder step: beam 5 of one sentence is 5 rows) on AVX-512 VNNI, read straight
// from the weights oneDNN packed (kernels/int8_gemm.h): at a few rows oneDNN's own call costs microseconds, as much
// as the arithmetic, and cannot be told to prefetch a weight that is read once per product and lives in L3. From
// five rows on the arithmetic (one vpdpbusd a cycle on the CPUs measured) bounds both kernels alike.
//
// The layout ("panels"): oneDNN's blocked s8 weights for VNNI (BA16a64b4a in its notation; checked, not assumed,
// at packing time) hold the output channels in groups of 64; within a group, every 4 consecutive inputs are one
// 256-byte record of 64 channels x 4 bytes, and the records follow each other through all k inputs. One vpdpbusd
// multiplies 16 channels x 4 inputs by the 4 activation bytes broadcast to every lane and adds the four products
// into int32 lanes. The sums are exact integers (no saturation: vpdpbusd, not vpdpbusds; |sum| < k * 255 * 127),
// so the result is oneDNN's bit for bit whatever the order.
#include <cstdint>

namespace parla::kernels::int8 {

// Packed weights in the panel layout: group g (channels 64g .. 64g+63) starts at data + g * group_stride; record i
// (inputs 4i .. 4i+3) at + 256 i; channel c's four bytes at + 4 c. A last group's channels past n are padding:
// multiplied, never stored.
struct Panels {
  const int8_t* data = nullptr;
  int64_t n = 0, k = 0, group_stride = 0;
};

// True where this CPU runs the panel kernel (AVX-512 with VNNI, and oneDNN not held below it by
// ONEDNN_MAX_CPU_ISA, so that the forced-AVX2 measurements stay AVX2).
bool vnni_rows_available();

// acc [m, n] (row stride n) = a [m, k] (uint8, row stride k) times the panels, k a multiple of 4. Threads split the
// channel groups when the product is large enough to pay for waking them (`parallel`).
void gemm_vnni_rows(int64_t m, const uint8_t* a, const Panels& b, int32_t* acc, bool parallel);

}  // namespace parla::kernels::int8

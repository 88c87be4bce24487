// Q3_K (GGML type 11): super-blocks of 256 weights = 16 sub-blocks of 16;
// w = d * scale[s] * (q - (hbit ? 0 : 4)), q = 2 low bits, scale[s] a signed 6-bit value.
// 3.4375 bits per weight. Layout (ggml-common.h block_q3_K): low bits as Q2_K (qs[32h + l] >> k);
// the high bit of weight 128h + 32(k/2) + l is bit (4h + k/2) of hmask[l]; when it is CLEAR the
// value is q - 4. Scales: see unpack_scales_q3_k.
#pragma once

#include <cstdint>

#include "quant/k_quants.h"

namespace fish {

struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];  // high bits, see layout above
  uint8_t qs[kQK_K / 4];     // low 2 bits
  uint8_t scales[12];        // 16 packed 6-bit scales (offset 32)
  uint16_t d;                // f16 super-block scale
};
static_assert(sizeof(BlockQ3_K) == 110, "ggml block_q3_K is 110 bytes");

// n % kQK_K == 0 for both.
void dequantize_row_q3_k(const BlockQ3_K* x, float* y, int64_t n);
// ggml quantize_row_q3_K_ref: make_q3_quants (x^2-weighted refinement) per sub-block, then
// signed 6-bit scales against d = max-magnitude scale / -32.
void quantize_row_q3_k_ref(const float* x, BlockQ3_K* y, int64_t n);

}  // namespace fish

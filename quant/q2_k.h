// Q2_K (GGML type 10): super-blocks of 256 weights = 16 sub-blocks of 16;
// w = d * (scales[s] & 0xF) * q - dmin * (scales[s] >> 4), q in 0..3. 2.625 bits per weight.
// Layout (ggml-common.h block_q2_K): for each half h (128 weights, qs[32h .. 32h+31]) and shift
// k = 0,2,4,6: weight 128h + 32(k/2) + l = (qs[32h + l] >> k) & 3, l = 0..31; sub-block s = w/16.
#pragma once

#include <cstdint>

#include "quant/k_quants.h"

namespace fish {

struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // per sub-block: low nibble scale, high nibble min (4 bits each)
  uint8_t qs[kQK_K / 4];       // 2-bit quants, see layout above
  uint16_t d;                  // f16 super-block scale for the scales
  uint16_t dmin;               // f16 super-block scale for the mins
};
static_assert(sizeof(BlockQ2_K) == 84, "ggml block_q2_K is 84 bytes");

// n % kQK_K == 0 for both.
void dequantize_row_q2_k(const BlockQ2_K* x, float* y, int64_t n);
// ggml quantize_row_q2_K_ref: make_qkx2_quants (3 levels, |x| weights, MAD) per sub-block, then
// 4-bit scales and mins against d = max scale / 15 and dmin = max min / 15.
void quantize_row_q2_k_ref(const float* x, BlockQ2_K* y, int64_t n);

}  // namespace fish

// Q5_K (GGML type 13): super-blocks of 256 weights = 8 sub-blocks of 32;
// w = d * sc[s] * q - dmin * m[s], q in 0..31. 5.5 bits per weight.
// Layout (ggml-common.h block_q5_K): low nibbles as Q4_K; the 5th bit of weight 64c + l is bit 2c
// of qh[l], of weight 64c + 32 + l bit 2c+1 of qh[l] (l = 0..31, chunk c = 0..3).
#pragma once

#include <cstdint>

#include "quant/k_quants.h"

namespace fish {

struct BlockQ5_K {
  uint16_t d;                   // f16 super-block scale for the sub-block scales
  uint16_t dmin;                // f16 super-block scale for the sub-block mins
  uint8_t scales[kKScaleSize];  // 8 scales + 8 mins, 6 bits each (get_scale_min_k4)
  uint8_t qh[kQK_K / 8];        // 5th bits, see layout above
  uint8_t qs[kQK_K / 2];        // low nibbles
};
static_assert(sizeof(BlockQ5_K) == 176, "ggml block_q5_K is 176 bytes");

// n % kQK_K == 0 for both.
void dequantize_row_q5_k(const BlockQ5_K* x, float* y, int64_t n);
// ggml quantize_row_q5_K_ref (make_qkx2_quants with 31 levels).
void quantize_row_q5_k_ref(const float* x, BlockQ5_K* y, int64_t n);

}  // namespace fish

// Q4_K (GGML type 12): super-blocks of 256 weights = 8 sub-blocks of 32;
// w = d * sc[s] * q - dmin * m[s], q in 0..15, sc/m 6-bit (get_scale_min_k4). 4.5 bits per weight.
// Layout (ggml-common.h block_q4_K): for each 64-weight chunk c (qs[32c .. 32c+31]): weight
// 64c + l = low nibble of qs[32c + l] (sub-block 2c), weight 64c + 32 + l = high nibble (2c+1).
#pragma once

#include <cstdint>

#include "quant/k_quants.h"

namespace fish {

struct BlockQ4_K {
  uint16_t d;                   // f16 super-block scale for the sub-block scales
  uint16_t dmin;                // f16 super-block scale for the sub-block mins
  uint8_t scales[kKScaleSize];  // 8 scales + 8 mins, 6 bits each
  uint8_t qs[kQK_K / 2];        // nibbles, see layout above
};
static_assert(sizeof(BlockQ4_K) == 144, "ggml block_q4_K is 144 bytes");

// n % kQK_K == 0 for both.
void dequantize_row_q4_k(const BlockQ4_K* x, float* y, int64_t n);
// ggml quantize_row_q4_K_ref: per sub-block make_qkx2_quants (min/scale search), then the
// scales and mins quantised to 6 bits against per-super-block d and dmin.
void quantize_row_q4_k_ref(const float* x, BlockQ4_K* y, int64_t n);

}  // namespace fish

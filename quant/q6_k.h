// Q6_K (GGML type 14): super-blocks of 256 weights = 16 sub-blocks of 16;
// w = d * scales[s] * (q - 32), q in 0..63, scales signed 8-bit. 6.5625 bits per weight.
// Layout (ggml-common.h block_q6_K), per 128-weight half h (ql[64h..], qh[32h..], l = 0..31):
//   weight 128h + l      = (ql[64h + l]      & 0xF) | ((qh[32h + l] >> 0) & 3) << 4
//   weight 128h + 32 + l = (ql[64h + 32 + l] & 0xF) | ((qh[32h + l] >> 2) & 3) << 4
//   weight 128h + 64 + l = (ql[64h + l]      >> 4)  | ((qh[32h + l] >> 4) & 3) << 4
//   weight 128h + 96 + l = (ql[64h + 32 + l] >> 4)  | ((qh[32h + l] >> 6) & 3) << 4
#pragma once

#include <cstdint>

#include "quant/k_quants.h"

namespace fish {

struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];      // low 4 bits, see layout above
  uint8_t qh[kQK_K / 4];      // high 2 bits
  int8_t scales[kQK_K / 16];  // per sub-block of 16, signed
  uint16_t d;                 // f16 super-block scale
};
static_assert(sizeof(BlockQ6_K) == 210, "ggml block_q6_K is 210 bytes");

// n % kQK_K == 0 for both.
void dequantize_row_q6_k(const BlockQ6_K* x, float* y, int64_t n);
// ggml quantize_row_q6_K_ref: make_qx_quants(32 levels) per sub-block, scales to int8.
void quantize_row_q6_k_ref(const float* x, BlockQ6_K* y, int64_t n);

}  // namespace fish

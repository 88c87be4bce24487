// Q8_K (GGML type 15): super-blocks of 256 int8 values with an f32 scale, w = d * q; the
// activation format of ggml's K-quant dot products. bsums[g] = sum of qs[16g .. 16g+15], so
// kernels can apply a sub-block min with one multiply. 9.125 bits per weight.
#pragma once

#include <cstdint>

#include "quant/k_quants.h"

namespace fish {

struct BlockQ8_K {
  float d;                    // f32 scale (not f16: activations need the range)
  int8_t qs[kQK_K];           // value j = d * qs[j]
  int16_t bsums[kQK_K / 16];  // sums of groups of 16 quants
};
static_assert(sizeof(BlockQ8_K) == 292, "ggml block_q8_K is 292 bytes");

// n % kQK_K == 0 for both.
void dequantize_row_q8_k(const BlockQ8_K* x, float* y, int64_t n);
// ggml quantize_row_q8_K_ref: iscale = -127 / max (max: the signed value of largest magnitude, so
// it maps to q = -127 and d = 1 / iscale has the opposite sign), q = min(127, nearest_int(iscale *
// v)); an all-zero block gives d = 0 and zero quants and bsums.
void quantize_row_q8_k_ref(const float* x, BlockQ8_K* y, int64_t n);

}  // namespace fish

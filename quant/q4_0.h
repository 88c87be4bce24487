// Q4_0 (GGML type 2): blocks of 32 weights, w = d * (q - 8), q in 0..15. 4.5 bits per weight.
// Layout (ggml-common.h block_q4_0): qs[j] low nibble = weight j, high nibble = weight j + 16.
#pragma once

#include <cstdint>

namespace fish {

inline constexpr int kQK4_0 = 32;  // weights per block

struct BlockQ4_0 {
  uint16_t d;              // f16 scale
  uint8_t qs[kQK4_0 / 2];  // nibbles, see layout above
};
static_assert(sizeof(BlockQ4_0) == 18, "ggml block_q4_0 is 18 bytes");

// n % kQK4_0 == 0 for both.
void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t n);
// ggml quantize_row_q4_0_ref: d = max-magnitude value / -8, q = min(15, int(v/d + 8.5)).
void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t n);

}  // namespace fish

// Q4_1 (GGML type 3): blocks of 32 weights, w = d * q + m, q in 0..15. 5 bits per weight.
// Layout (ggml-common.h block_q4_1): qs[j] low nibble = weight j, high nibble = weight j + 16.
#pragma once

#include <cstdint>

namespace fish {

inline constexpr int kQK4_1 = 32;  // weights per block

struct BlockQ4_1 {
  uint16_t d;              // f16 scale
  uint16_t m;              // f16 minimum (offset)
  uint8_t qs[kQK4_1 / 2];  // nibbles, see layout above
};
static_assert(sizeof(BlockQ4_1) == 20, "ggml block_q4_1 is 20 bytes");

// n % kQK4_1 == 0 for both.
void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t n);
// ggml quantize_row_q4_1_ref: d = (max - min) / 15, m = min, q = min(15, int((v - min)/d + 0.5)).
void quantize_row_q4_1_ref(const float* x, BlockQ4_1* y, int64_t n);

}  // namespace fish

// Q5_1 (GGML type 7): blocks of 32 weights, w = d * q + m, q in 0..31. 6 bits per weight.
// Layout (ggml-common.h block_q5_1): as Q5_0 plus an f16 minimum m after d.
#pragma once

#include <cstdint>

namespace fish {

inline constexpr int kQK5_1 = 32;  // weights per block

struct BlockQ5_1 {
  uint16_t d;              // f16 scale
  uint16_t m;              // f16 minimum (offset)
  uint8_t qh[4];           // 5th bits, little-endian uint32, bit i = weight i
  uint8_t qs[kQK5_1 / 2];  // low nibbles: weight j low, weight j + 16 high
};
static_assert(sizeof(BlockQ5_1) == 24, "ggml block_q5_1 is 24 bytes");

// n % kQK5_1 == 0 for both.
void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t n);
// ggml quantize_row_q5_1_ref: d = (max - min) / 31, m = min, q = min(31, int((v - min)/d + 0.5)).
void quantize_row_q5_1_ref(const float* x, BlockQ5_1* y, int64_t n);

}  // namespace fish

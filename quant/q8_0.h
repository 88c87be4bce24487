// Q8_0 (GGML type 8) and Q8_1 (GGML type 9): blocks of 32 int8 weights with an f16 scale,
// w = d * q. Q8_0 is 8.5 bits per weight. Q8_1 also stores s = d * sum(q) (f16): the
// activation format ggml pairs with Q4_1/Q5_1 weights so the min term is one multiply.
#pragma once

#include <cstdint>

namespace fish {

inline constexpr int kQK8_0 = 32;  // weights per block
inline constexpr int kQK8_1 = 32;

struct BlockQ8_0 {
  uint16_t d;         // f16 scale
  int8_t qs[kQK8_0];  // weight j = d * qs[j]
};
static_assert(sizeof(BlockQ8_0) == 34, "ggml block_q8_0 is 34 bytes");

struct BlockQ8_1 {
  uint16_t d;  // f16 scale
  uint16_t s;  // f16 of d * sum(qs)
  int8_t qs[kQK8_1];
};
static_assert(sizeof(BlockQ8_1) == 36, "ggml block_q8_1 is 36 bytes");

// n % 32 == 0 for all.
void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n);
// ggml quantize_row_q8_0_ref: d = amax / 127, q = round(v / d) (round half away from zero).
void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t n);
void dequantize_row_q8_1(const BlockQ8_1* x, float* y, int64_t n);
// ggml quantize_row_q8_1_ref: as Q8_0, plus s = d * sum(q) computed in float.
void quantize_row_q8_1_ref(const float* x, BlockQ8_1* y, int64_t n);

}  // namespace fish

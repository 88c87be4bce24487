// Q5_0 (GGML type 6): blocks of 32 weights, w = d * (q - 16), q in 0..31. 5.5 bits per weight.
// Layout (ggml-common.h block_q5_0): qs[j] low nibble = low 4 bits of weight j, high nibble =
// weight j + 16; bit i of qh (little-endian uint32) is bit 4 of weight i.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

namespace fish {

inline constexpr int kQK5_0 = 32;  // weights per block

struct BlockQ5_0 {
  uint16_t d;              // f16 scale
  uint8_t qh[4];           // 5th bits, little-endian uint32, bit i = weight i
  uint8_t qs[kQK5_0 / 2];  // low nibbles, see layout above
};
static_assert(sizeof(BlockQ5_0) == 22, "ggml block_q5_0 is 22 bytes");

// Byte b of kQ5HighBitBytes[v] is 0x10 when bit b of v is set: expands 8 qh bits into the bit-4
// contributions of 8 quants with one lookup (shared by Q5_0 and Q5_1 decoding).
inline constexpr std::array<uint64_t, 256> kQ5HighBitBytes = [] {
  std::array<uint64_t, 256> t{};
  for (uint32_t v = 0; v < 256; ++v) {
    for (uint32_t b = 0; b < 8; ++b) t[v] |= uint64_t((v >> b) & 1u) << (8 * b + 4);
  }
  return t;
}();

// hi[i] = 0x10 if quant i (0..31) has its 5th bit set in qh, else 0. Little-endian host.
inline void unpack_q5_high_bits(const uint8_t qh[4], uint8_t hi[32]) {
  for (int k = 0; k < 4; ++k) std::memcpy(hi + 8 * k, &kQ5HighBitBytes[qh[k]], 8);
}

// n % kQK5_0 == 0 for both.
void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t n);
// ggml quantize_row_q5_0_ref: d = max-magnitude value / -16, q = min(31, int(v/d + 16.5)).
void quantize_row_q5_0_ref(const float* x, BlockQ5_0* y, int64_t n);

}  // namespace fish
